//! The graph of a BYOC JSON runtime module, as TVM's `JSONSerializer`
//! (`codegen_json.h`) writes it and `JSONRuntimeBase::LoadGraph` reads it:
//!
//! ```text
//! {"nodes": [{"op": "input"|"const"|"kernel", "name": ..., "inputs": [[id, index(, version)], ...],
//!             "attrs": {"shape": [[[d, ...], ...]], "dtype": [["float32", ...]],
//!                       "num_inputs": "2", "num_outputs": "1", "<attr>": [["s", ...]], ...}}, ...],
//!  "arg_nodes": [ids of input/const nodes], "heads": [[id, index(, version)], ...],
//!  "node_row_ptr": [0, ...]}
//! ```
//!
//! Everything TVM trusts is checked here, at load time: the top-level keys (any other is an error,
//! `Unknown key`), node ids and output indices of every entry, `node_row_ptr` against the output
//! counts, `shape`/`dtype` counts, `num_inputs` against the input list, inputs that come before
//! their node (TVM's serializer writes nodes in dependency order, and the runtimes execute them
//! in that order), and the constants against the module's `const_names` (same names, same order).

use crate::abi::DLDataType;
use crate::error::{Error, Result};
use serde_json::Value as Json;
use std::collections::BTreeMap;

/// What a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// A graph input, bound per call.
    Input,
    /// A constant, bound at initialisation (`__init_<symbol>`).
    Const,
    /// An operator of the backend; its `name` is the operator (`nn.conv2d`, a composite name).
    Kernel,
}

/// An output of a node: `(node id, output index)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntryRef {
    /// The node.
    pub node: u32,
    /// Its output.
    pub index: u32,
}

/// One node.
#[derive(Clone, Debug)]
pub struct Node {
    /// What it is.
    pub kind: NodeKind,
    /// The input/constant name, or the operator of a kernel.
    pub name: String,
    /// Its inputs.
    pub inputs: Vec<EntryRef>,
    /// The shape of each output.
    pub shapes: Vec<Vec<i64>>,
    /// The data type of each output.
    pub dtypes: Vec<DLDataType>,
    /// Every other attribute: a list of strings (TVM wraps each in one more list).
    pub attrs: BTreeMap<String, Vec<String>>,
}

impl Node {
    /// The number of outputs.
    pub fn num_outputs(&self) -> usize {
        self.shapes.len()
    }

    /// Attribute `key`, or an error naming the node.
    pub fn attr(&self, id: usize, key: &str) -> Result<&[String]> {
        self.attrs
            .get(key)
            .map(Vec::as_slice)
            .ok_or_else(|| Error::value(format!("node {id} ({}): attribute `{key}` is missing", self.name)))
    }

    /// Attribute `key` if present.
    pub(crate) fn attr_opt(&self, key: &str) -> Option<&[String]> {
        self.attrs.get(key).map(Vec::as_slice)
    }
}

/// A parsed and checked graph.
#[derive(Clone, Debug)]
pub struct Graph {
    /// The nodes, in dependency order.
    pub nodes: Vec<Node>,
    /// The input and constant nodes, in argument order.
    pub arg_nodes: Vec<u32>,
    /// The first entry id of each node (and the total, last).
    pub node_row_ptr: Vec<u32>,
    /// The outputs.
    pub heads: Vec<EntryRef>,
    /// The entries bound to the function's input arguments, in order (`input_var_eid_`).
    pub input_entries: Vec<EntryRef>,
    /// The constant nodes in `arg_nodes` order (`const_idx_`), one per const name.
    pub const_nodes: Vec<u32>,
}

impl Graph {
    /// The entry id of an entry.
    pub fn entry_id(&self, e: EntryRef) -> usize {
        self.node_row_ptr[e.node as usize] as usize + e.index as usize
    }

    /// The number of entries.
    pub fn num_entries(&self) -> usize {
        self.node_row_ptr.last().copied().unwrap_or(0) as usize
    }

    /// The shape of an entry.
    pub fn shape(&self, e: EntryRef) -> &[i64] {
        &self.nodes[e.node as usize].shapes[e.index as usize]
    }

    /// The data type of an entry.
    pub fn dtype(&self, e: EntryRef) -> DLDataType {
        self.nodes[e.node as usize].dtypes[e.index as usize]
    }

    /// Parses `text` and checks it against the module's constant names.
    pub fn parse(text: &str, const_names: &[String]) -> Result<Graph> {
        let json: Json = serde_json::from_str(text).map_err(|e| bad(format!("the graph is not valid JSON: {e}")))?;
        let top = json.as_object().ok_or_else(|| bad("the graph must be a JSON object"))?;
        let (mut nodes, mut arg_nodes, mut row_ptr, mut heads) = (None, None, None, None);
        for (key, v) in top {
            match key.as_str() {
                "nodes" => nodes = Some(v),
                "arg_nodes" => arg_nodes = Some(v),
                "node_row_ptr" => row_ptr = Some(v),
                "heads" => heads = Some(v),
                // Written by TVM v0.9+'s serializer (the region's name); read and unused there too.
                "symbol" if v.is_string() => {}
                "symbol" => return Err(bad("`symbol` must be a string")),
                other => return Err(bad(format!("Unknown key: {other}"))),
            }
        }
        fn need<'j>(v: Option<&'j Json>, k: &str) -> Result<&'j Json> {
            v.ok_or_else(|| bad(format!("the graph has no `{k}`")))
        }
        let nodes = need(nodes, "nodes")?
            .as_array()
            .ok_or_else(|| bad("`nodes` must be a list"))?
            .iter()
            .enumerate()
            .map(|(i, n)| parse_node(i, n))
            .collect::<Result<Vec<_>>>()?;
        let arg_nodes = u32_list(need(arg_nodes, "arg_nodes")?, "arg_nodes")?;
        let node_row_ptr = u32_list(need(row_ptr, "node_row_ptr")?, "node_row_ptr")?;
        let heads = need(heads, "heads")?
            .as_array()
            .ok_or_else(|| bad("`heads` must be a list"))?
            .iter()
            .map(|e| parse_entry(e, "heads"))
            .collect::<Result<Vec<_>>>()?;
        let mut g = Graph { nodes, arg_nodes, node_row_ptr, heads, input_entries: Vec::new(), const_nodes: Vec::new() };
        g.check(const_names)?;
        Ok(g)
    }

    fn check(&mut self, const_names: &[String]) -> Result<()> {
        let n = self.nodes.len();
        if self.node_row_ptr.len() != n + 1 {
            return Err(bad(format!(
                "node_row_ptr has {} items for {n} nodes (expected {})",
                self.node_row_ptr.len(),
                n + 1
            )));
        }
        let mut next = 0u64;
        for (i, node) in self.nodes.iter().enumerate() {
            if u64::from(self.node_row_ptr[i]) != next {
                return Err(bad(format!(
                    "node_row_ptr[{i}] is {} but the nodes before it have {next} outputs",
                    self.node_row_ptr[i]
                )));
            }
            next += node.num_outputs() as u64;
        }
        if u64::from(self.node_row_ptr[n]) != next {
            return Err(bad(format!(
                "node_row_ptr ends at {} but the nodes have {next} outputs",
                self.node_row_ptr[n]
            )));
        }
        let check_entry = |e: EntryRef, user: &str| -> Result<()> {
            let node = self
                .nodes
                .get(e.node as usize)
                .ok_or_else(|| bad(format!("{user} reads node {}, but the graph has {n} nodes", e.node)))?;
            if e.index as usize >= node.num_outputs() {
                return Err(bad(format!(
                    "{user} reads output {} of node {} ({}), which has {} outputs",
                    e.index,
                    e.node,
                    node.name,
                    node.num_outputs()
                )));
            }
            Ok(())
        };
        for (i, node) in self.nodes.iter().enumerate() {
            let user = format!("node {i} ({})", node.name);
            for &e in &node.inputs {
                check_entry(e, &user)?;
                if e.node as usize >= i {
                    return Err(bad(format!("{user} reads node {}, which does not come before it", e.node)));
                }
            }
            if node.kind != NodeKind::Kernel && !node.inputs.is_empty() {
                return Err(bad(format!("{user}: an {:?} node cannot have inputs", node.kind)));
            }
        }
        for &h in &self.heads {
            check_entry(h, "a head")?;
        }
        let mut seen = vec![false; n];
        let mut consts = Vec::new();
        for &id in &self.arg_nodes {
            let node = self
                .nodes
                .get(id as usize)
                .ok_or_else(|| bad(format!("arg_nodes names node {id}, but the graph has {n} nodes")))?;
            if std::mem::replace(&mut seen[id as usize], true) {
                return Err(bad(format!("arg_nodes names node {id} twice")));
            }
            match node.kind {
                NodeKind::Input => {
                    self.input_entries.extend((0..node.num_outputs() as u32).map(|index| EntryRef { node: id, index }));
                }
                NodeKind::Const => {
                    if !const_names.contains(&node.name) {
                        return Err(bad(format!("Found non-existent constant: {}", node.name)));
                    }
                    if node.num_outputs() != 1 {
                        return Err(bad(format!(
                            "constant {} must have one output, not {}",
                            node.name,
                            node.num_outputs()
                        )));
                    }
                    consts.push(id);
                }
                NodeKind::Kernel => {
                    return Err(bad(format!("arg_nodes names node {id} ({}), which is a kernel", node.name)));
                }
            }
        }
        if consts.len() != const_names.len() {
            return Err(bad(format!(
                "Found mismatch for the number of constants in the graph ({}) and required ({})",
                consts.len(),
                const_names.len()
            )));
        }
        for (i, (&id, want)) in consts.iter().zip(const_names).enumerate() {
            if &self.nodes[id as usize].name != want {
                return Err(bad(format!(
                    "The position of constant in the graph must be the same as the required: constant {i} is {} in the graph but {want} in the const names",
                    self.nodes[id as usize].name
                )));
            }
        }
        // Every input or constant that a kernel or head reads must be bound: it is an argument.
        for (i, node) in self.nodes.iter().enumerate() {
            if node.kind != NodeKind::Kernel && !seen[i] {
                let used = self.heads.iter().any(|h| h.node as usize == i)
                    || self.nodes.iter().any(|m| m.inputs.iter().any(|e| e.node as usize == i));
                if used {
                    return Err(bad(format!(
                        "node {i} ({}) is an {:?} node missing from arg_nodes",
                        node.name, node.kind
                    )));
                }
            }
        }
        self.const_nodes = consts;
        Ok(())
    }
}

fn bad(msg: impl std::fmt::Display) -> Error {
    Error::value(format!("JSON runtime graph: {msg}"))
}

fn as_u32(v: &Json, what: &str) -> Result<u32> {
    v.as_u64()
        .and_then(|x| u32::try_from(x).ok())
        .ok_or_else(|| bad(format!("{what}: {v} is not an unsigned 32-bit integer")))
}

fn u32_list(v: &Json, what: &str) -> Result<Vec<u32>> {
    v.as_array().ok_or_else(|| bad(format!("`{what}` must be a list")))?.iter().map(|x| as_u32(x, what)).collect()
}

fn parse_entry(v: &Json, what: &str) -> Result<EntryRef> {
    let a = v.as_array().ok_or_else(|| bad(format!("{what}: an entry must be [node, index(, version)], not {v}")))?;
    if !(2..=3).contains(&a.len()) {
        return Err(bad(format!("{what}: an entry must be [node, index(, version)], not {v}")));
    }
    if let Some(ver) = a.get(2) {
        as_u32(ver, what)?;
    }
    Ok(EntryRef { node: as_u32(&a[0], what)?, index: as_u32(&a[1], what)? })
}

/// `[[ ... ]]`: the single list inside TVM's wrapping list.
fn unwrap_attr<'a>(node: &str, key: &str, v: &'a Json) -> Result<&'a Json> {
    match v.as_array().map(Vec::as_slice) {
        Some([inner]) => Ok(inner),
        _ => Err(bad(format!("node {node}: attribute `{key}` must be a list holding one list, not {v}"))),
    }
}

fn strings(node: &str, key: &str, v: &Json) -> Result<Vec<String>> {
    let not = || bad(format!("node {node}: attribute `{key}` must be a list of strings, not {v}"));
    v.as_array().ok_or_else(not)?.iter().map(|s| s.as_str().map(str::to_owned).ok_or_else(not)).collect()
}

fn parse_node(i: usize, v: &Json) -> Result<Node> {
    let obj = v.as_object().ok_or_else(|| bad(format!("node {i} is not an object")))?;
    let (mut op, mut name, mut inputs, mut attrs) = (None, None, Vec::new(), None);
    for (key, val) in obj {
        match key.as_str() {
            "op" => op = Some(val.as_str().ok_or_else(|| bad(format!("node {i}: `op` must be a string")))?),
            "name" => name = Some(val.as_str().ok_or_else(|| bad(format!("node {i}: `name` must be a string")))?),
            "inputs" => {
                inputs = val
                    .as_array()
                    .ok_or_else(|| bad(format!("node {i}: `inputs` must be a list")))?
                    .iter()
                    .map(|e| parse_entry(e, &format!("node {i}")))
                    .collect::<Result<Vec<_>>>()?
            }
            "attrs" | "attr" => attrs = Some(val),
            other => return Err(bad(format!("node {i}: Unknown key: {other}"))),
        }
    }
    let op = op.ok_or_else(|| bad(format!("node {i} has no `op`")))?;
    let name = name.ok_or_else(|| bad(format!("node {i} has no `name`")))?.to_owned();
    let kind = match op {
        "input" => NodeKind::Input,
        "const" => NodeKind::Const,
        "kernel" => NodeKind::Kernel,
        other => {
            return Err(bad(format!("node {i} ({name}): unknown op type `{other}` (expected input, const or kernel)")))
        }
    };
    let label = format!("{i} ({name})");
    let mut node = Node { kind, name, inputs, shapes: Vec::new(), dtypes: Vec::new(), attrs: BTreeMap::new() };
    let Some(attrs) = attrs else {
        return Err(bad(format!("node {label} has no attributes (shape and dtype are required)")));
    };
    let attrs = attrs.as_object().ok_or_else(|| bad(format!("node {label}: attributes must be an object")))?;
    let (mut num_inputs, mut num_outputs, mut have_shape, mut have_dtype) = (None, None, false, false);
    for (key, val) in attrs {
        match key.as_str() {
            "num_inputs" | "num_outputs" => {
                let n = val
                    .as_str()
                    .and_then(|s| s.parse::<u32>().ok())
                    .ok_or_else(|| bad(format!("node {label}: `{key}` must be a decimal string, not {val}")))?;
                if key == "num_inputs" {
                    num_inputs = Some(n);
                } else {
                    num_outputs = Some(n);
                }
            }
            "shape" => {
                have_shape = true;
                let list = unwrap_attr(&label, key, val)?
                    .as_array()
                    .ok_or_else(|| bad(format!("node {label}: `shape` must hold a list of shapes")))?;
                for s in list {
                    let dims = s.as_array().ok_or_else(|| bad(format!("node {label}: shape {s} is not a list")))?;
                    let dims = dims
                        .iter()
                        .map(|d| d.as_i64().filter(|&d| d >= 0))
                        .collect::<Option<Vec<i64>>>()
                        .ok_or_else(|| bad(format!("node {label}: shape {s} must hold non-negative integers")))?;
                    node.shapes.push(dims);
                }
            }
            "dtype" => {
                have_dtype = true;
                for t in strings(&label, key, unwrap_attr(&label, key, val)?)? {
                    let dt =
                        crate::value::dtype::parse(&t).map_err(|e| bad(format!("node {label}: dtype `{t}`: {e}")))?;
                    node.dtypes.push(dt);
                }
            }
            _ => {
                let list = strings(&label, key, unwrap_attr(&label, key, val)?)?;
                node.attrs.insert(key.clone(), list);
            }
        }
    }
    if !have_shape || !have_dtype {
        return Err(bad(format!("node {label} needs both `shape` and `dtype` attributes")));
    }
    if node.shapes.len() != node.dtypes.len() {
        return Err(bad(format!("node {label} has {} shapes but {} dtypes", node.shapes.len(), node.dtypes.len())));
    }
    if node.shapes.is_empty() {
        return Err(bad(format!("node {label} has no outputs")));
    }
    if let Some(n) = num_outputs {
        if n as usize != node.shapes.len() {
            return Err(bad(format!("node {label} declares {n} outputs but has {} shapes", node.shapes.len())));
        }
    }
    if let Some(n) = num_inputs {
        if n as usize != node.inputs.len() {
            return Err(bad(format!("node {label} declares {n} inputs but lists {}", node.inputs.len())));
        }
    }
    Ok(node)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(nodes: &str, extra: &str) -> String {
        format!(
            r#"{{"nodes": [{nodes}], "arg_nodes": [0, 1], "heads": [[2, 0, 0]], "node_row_ptr": [0, 1, 2, 3]{extra}}}"#
        )
    }

    const IN: &str = r#"{"op": "input", "name": "x", "attrs": {"shape": [[[1, 4]]], "dtype": [["float32"]]}}"#;
    const W: &str = r#"{"op": "const", "name": "w", "attrs": {"shape": [[[3, 4]]], "dtype": [["float32"]]}}"#;
    const K: &str = r#"{"op": "kernel", "name": "nn.dense", "inputs": [[0, 0, 0], [1, 0, 0]],
        "attrs": {"num_inputs": "2", "num_outputs": "1", "shape": [[[1, 3]]], "dtype": [["float32"]], "units": [[""]]}}"#;

    fn err(text: &str, consts: &[&str]) -> String {
        let names: Vec<String> = consts.iter().map(|s| (*s).to_owned()).collect();
        Graph::parse(text, &names).unwrap_err().to_string()
    }

    #[test]
    fn parses_tvm_layout() {
        let g = Graph::parse(&graph(&format!("{IN}, {W}, {K}"), ""), &["w".to_owned()]).unwrap();
        assert_eq!(g.input_entries, vec![EntryRef { node: 0, index: 0 }]);
        assert_eq!(g.const_nodes, vec![1]);
        assert_eq!(g.nodes[2].attrs["units"], vec![String::new()]);
        assert_eq!(g.shape(g.heads[0]), &[1, 3]);
        assert_eq!(g.num_entries(), 3);
    }

    #[test]
    fn v0_9_symbol_key_is_accepted() {
        let g = Graph::parse(
            &graph(&format!("{IN}, {W}, {K}"), r#", "symbol": "tvmgen_default_dnnl_main_0""#),
            &["w".to_owned()],
        );
        assert_eq!(g.unwrap().num_entries(), 3);
    }

    #[test]
    fn damaged_graphs() {
        let ok = graph(&format!("{IN}, {W}, {K}"), "");
        assert!(err(&ok[..ok.len() - 10], &["w"]).contains("not valid JSON"));
        assert!(
            err(&graph(&format!("{IN}, {W}, {K}"), r#", "symbolic": "x""#), &["w"]).contains("Unknown key: symbolic")
        );
        assert!(
            err(&graph(&format!("{IN}, {W}, {K}"), r#", "symbol": 3"#), &["w"]).contains("`symbol` must be a string")
        );
        assert!(err(&ok, &["v"]).contains("Found non-existent constant: w"));
        assert!(err(&ok, &["w", "v"]).contains("number of constants"));
        let k3 = K.replace(r#""num_inputs": "2""#, r#""num_inputs": "3""#);
        assert!(err(&graph(&format!("{IN}, {W}, {k3}"), ""), &["w"]).contains("declares 3 inputs but lists 2"));
        let fwd = K.replace("[1, 0, 0]]", "[2, 0, 0]]");
        assert!(err(&graph(&format!("{IN}, {W}, {fwd}"), ""), &["w"]).contains("does not come before it"));
        let far = K.replace("[1, 0, 0]]", "[9, 0, 0]]");
        assert!(err(&graph(&format!("{IN}, {W}, {far}"), ""), &["w"]).contains("graph has 3 nodes"));
        let idx = K.replace("[1, 0, 0]]", "[1, 1, 0]]");
        assert!(err(&graph(&format!("{IN}, {W}, {idx}"), ""), &["w"]).contains("which has 1 outputs"));
        let rows = ok.replace("[0, 1, 2, 3]", "[0, 1, 2]");
        assert!(err(&rows, &["w"]).contains("node_row_ptr has 3 items"));
        let rows = ok.replace("[0, 1, 2, 3]", "[0, 1, 3, 4]");
        assert!(err(&rows, &["w"]).contains("node_row_ptr[2] is 3"));
        let noshape = IN.replace(r#""shape": [[[1, 4]]], "#, "");
        assert!(err(&graph(&format!("{noshape}, {W}, {K}"), ""), &["w"]).contains("needs both `shape` and `dtype`"));
        let two_dtypes = IN.replace(r#"[["float32"]]"#, r#"[["float32", "float32"]]"#);
        assert!(err(&graph(&format!("{two_dtypes}, {W}, {K}"), ""), &["w"]).contains("1 shapes but 2 dtypes"));
        let unwrapped = K.replace(r#""units": [[""]]"#, r#""units": [""]"#);
        assert!(
            err(&graph(&format!("{IN}, {W}, {unwrapped}"), ""), &["w"]).contains("attribute `units` must be a list")
        );
        let op = IN.replace(r#""op": "input""#, r#""op": "null""#);
        assert!(err(&graph(&format!("{op}, {W}, {K}"), ""), &["w"]).contains("unknown op type `null`"));
        let args = ok.replace(r#""arg_nodes": [0, 1]"#, r#""arg_nodes": [0, 2]"#);
        assert!(err(&args, &["w"]).contains("which is a kernel"));
        let args = ok.replace(r#""arg_nodes": [0, 1]"#, r#""arg_nodes": [1]"#);
        assert!(err(&args, &["w"]).contains("missing from arg_nodes"));
        let neg = IN.replace("[1, 4]", "[1, -4]");
        assert!(err(&graph(&format!("{neg}, {W}, {K}"), ""), &["w"]).contains("non-negative"));
    }
}
