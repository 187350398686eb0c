//! The graph JSON of the graph executor, parsed with serde_json into
//! typed structs and checked as TVM's reader checks it (plus length checks TVM lacks).

use crate::abi::DLDataType;
use crate::error::{Error, Result};
use crate::value::dtype;
use serde_json::{Map, Value as Json};
use std::collections::BTreeMap;

/// `[node_id, index(, version)]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeEntry {
    /// Producing node.
    pub node_id: u32,
    /// Output index of that node.
    pub index: u32,
}

/// Operator attributes of a node.
#[derive(Clone, Debug, Default)]
pub struct NodeAttrs {
    /// Function to call (`__nop`, `__copy` or a symbol of the code module).
    pub func_name: String,
    /// Informational.
    pub num_inputs: u32,
    /// Number of output entries the op writes.
    pub num_outputs: u32,
    /// Present every argument as a 1-D tensor.
    pub flatten_data: bool,
    /// Every other string attribute (`hash`, `*layout*`, ...).
    pub extra: BTreeMap<String, String>,
}

/// A node.
#[derive(Clone, Debug)]
pub struct Node {
    /// `null` or `tvm_op`.
    pub op: String,
    /// Name (input/param name for `null` nodes).
    pub name: String,
    /// Operator inputs.
    pub inputs: Vec<NodeEntry>,
    /// Attributes.
    pub attrs: NodeAttrs,
}

/// The parsed graph.
#[derive(Clone, Debug)]
pub struct Graph {
    /// Nodes in topological order.
    pub nodes: Vec<Node>,
    /// Input nodes (parameters included), in input-index order.
    pub arg_nodes: Vec<u32>,
    /// Entry id of output k of node n is `node_row_ptr[n] + k`.
    pub node_row_ptr: Vec<u32>,
    /// Graph outputs.
    pub heads: Vec<NodeEntry>,
    /// Per-entry dtype.
    pub dltype: Vec<DLDataType>,
    /// Per-entry storage slot.
    pub storage_id: Vec<usize>,
    /// Per-entry shape.
    pub shape: Vec<Vec<i64>>,
    /// Per-entry device type, if given.
    pub device_index: Option<Vec<i32>>,
}

fn invalid(what: impl std::fmt::Display) -> Error {
    Error::value(format!("invalid graph JSON: {what}"))
}

fn as_u32(v: &Json, what: &str) -> Result<u32> {
    v.as_u64()
        .and_then(|x| u32::try_from(x).ok())
        .ok_or_else(|| invalid(format!("{what}: expected an unsigned integer, got {v}")))
}

fn u32_array(v: &Json, what: &str) -> Result<Vec<u32>> {
    v.as_array().ok_or_else(|| invalid(format!("{what} must be an array")))?.iter().map(|x| as_u32(x, what)).collect()
}

fn entry(v: &Json, what: &str) -> Result<NodeEntry> {
    let a = v.as_array().ok_or_else(|| invalid(format!("{what}: a node entry must be an array")))?;
    if a.len() < 2 || a.len() > 3 {
        return Err(invalid(format!("{what}: a node entry has 2 or 3 elements, got {}", a.len())));
    }
    Ok(NodeEntry { node_id: as_u32(&a[0], what)?, index: as_u32(&a[1], what)? })
}

/// C `strtoul` in base 10: leading digits, anything else parses as 0.
fn strtoul(s: &str) -> u32 {
    let t = s.trim_start();
    let digits: String = t.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse::<u64>().map(|v| v.min(u64::from(u32::MAX)) as u32).unwrap_or(0)
}

fn node_attrs(obj: &Map<String, Json>, node: &str) -> Result<NodeAttrs> {
    let mut a = NodeAttrs::default();
    let mut seen = 0;
    for (k, v) in obj {
        let s = v.as_str().ok_or_else(|| invalid(format!("node {node}: attribute {k} must be a string")))?;
        match k.as_str() {
            "func_name" => a.func_name = s.to_owned(),
            "num_inputs" => a.num_inputs = strtoul(s),
            "num_outputs" => a.num_outputs = strtoul(s),
            "flatten_data" => a.flatten_data = strtoul(s) != 0,
            _ => {
                a.extra.insert(k.clone(), s.to_owned());
                continue;
            }
        }
        seen += 1;
    }
    if seen != 4 {
        return Err(invalid(format!(
            "node {node}: attrs must contain func_name, num_inputs, num_outputs and flatten_data"
        )));
    }
    Ok(a)
}

fn node(v: &Json, id: usize) -> Result<Node> {
    let obj = v.as_object().ok_or_else(|| invalid(format!("node {id} is not an object")))?;
    let (mut op, mut name, mut inputs, mut attrs) = (None, None, None, None);
    for (k, val) in obj {
        match k.as_str() {
            "op" => {
                op = Some(val.as_str().ok_or_else(|| invalid(format!("node {id}: op must be a string")))?.to_owned())
            }
            "name" => {
                name =
                    Some(val.as_str().ok_or_else(|| invalid(format!("node {id}: name must be a string")))?.to_owned())
            }
            "inputs" => {
                let arr = val.as_array().ok_or_else(|| invalid(format!("node {id}: inputs must be an array")))?;
                inputs = Some(arr.iter().map(|e| entry(e, &format!("node {id} inputs"))).collect::<Result<Vec<_>>>()?);
            }
            "attrs" | "attr" => {
                let o = val.as_object().ok_or_else(|| invalid(format!("node {id}: attrs must be an object")))?;
                attrs = Some(o);
            }
            "control_deps" => {}
            other => return Err(invalid(format!("node {id}: do not support key {other}"))),
        }
    }
    let name = name.ok_or_else(|| invalid(format!("node {id} has no name")))?;
    let op = op.ok_or_else(|| invalid(format!("node {name} has no op")))?;
    let inputs = inputs.ok_or_else(|| invalid(format!("node {name} has no inputs")))?;
    let attrs = match attrs {
        Some(o) => node_attrs(o, &name)?,
        None if op == "tvm_op" => return Err(invalid(format!("node {name}: tvm_op without attrs"))),
        None => NodeAttrs::default(),
    };
    Ok(Node { op, name, inputs, attrs })
}

fn tagged<'a>(v: &'a Json, key: &str, tag: &str) -> Result<&'a Vec<Json>> {
    let a =
        v.as_array().filter(|a| a.len() == 2).ok_or_else(|| invalid(format!("attrs.{key} must be [type, values]")))?;
    if a[0].as_str() != Some(tag) {
        return Err(invalid(format!("attrs.{key} must be tagged {tag}, got {}", a[0])));
    }
    a[1].as_array().ok_or_else(|| invalid(format!("attrs.{key} values must be an array")))
}

impl Graph {
    /// Parses and checks a graph JSON text.
    pub fn parse(text: &str) -> Result<Graph> {
        let root: Json = serde_json::from_str(text).map_err(invalid)?;
        let obj = root.as_object().ok_or_else(|| invalid("the graph must be an object"))?;
        let (mut nodes, mut arg_nodes, mut row_ptr, mut heads, mut attrs) = (None, None, None, None, None);
        for (k, v) in obj {
            match k.as_str() {
                "nodes" => {
                    let arr = v.as_array().ok_or_else(|| invalid("nodes must be an array"))?;
                    nodes = Some(arr.iter().enumerate().map(|(i, n)| node(n, i)).collect::<Result<Vec<_>>>()?);
                }
                "arg_nodes" => arg_nodes = Some(u32_array(v, "arg_nodes")?),
                "node_row_ptr" => row_ptr = Some(u32_array(v, "node_row_ptr")?),
                "heads" => {
                    let arr = v.as_array().ok_or_else(|| invalid("heads must be an array"))?;
                    heads = Some(arr.iter().map(|e| entry(e, "heads")).collect::<Result<Vec<_>>>()?);
                }
                "attrs" => attrs = Some(v.as_object().ok_or_else(|| invalid("attrs must be an object"))?),
                "metadata" => break,
                other => return Err(invalid(format!("key {other} is not supported"))),
            }
        }
        let missing = |k: &str| invalid(format!("invalid format: missing {k}"));
        let nodes = nodes.ok_or_else(|| missing("nodes"))?;
        let arg_nodes = arg_nodes.ok_or_else(|| missing("arg_nodes"))?;
        let node_row_ptr = row_ptr.ok_or_else(|| missing("node_row_ptr"))?;
        let heads = heads.ok_or_else(|| missing("heads"))?;
        let attrs = attrs.ok_or_else(|| missing("attrs"))?;

        let (mut dltype, mut storage_id, mut shape, mut device_index) = (None, None, None, None);
        for (k, v) in attrs {
            match k.as_str() {
                "dltype" => {
                    let vals = tagged(v, k, "list_str")?;
                    dltype = Some(
                        vals.iter()
                            .map(|t| {
                                t.as_str()
                                    .ok_or_else(|| invalid("dltype values must be strings"))
                                    .and_then(dtype::parse)
                            })
                            .collect::<Result<Vec<_>>>()?,
                    );
                }
                "storage_id" => {
                    let vals = tagged(v, k, "list_int")?;
                    storage_id = Some(
                        vals.iter()
                            .map(|x| match x.as_i64() {
                                Some(s) if s >= 0 => Ok(s as usize),
                                Some(_) => Err(invalid("Do not support runtime shape op (negative storage id)")),
                                None => Err(invalid("storage_id values must be integers")),
                            })
                            .collect::<Result<Vec<_>>>()?,
                    );
                }
                "shape" => {
                    let vals = tagged(v, k, "list_shape")?;
                    shape = Some(
                        vals.iter()
                            .map(|s| {
                                s.as_array()
                                    .ok_or_else(|| invalid("shape values must be arrays"))?
                                    .iter()
                                    .map(|d| {
                                        d.as_i64().filter(|&d| d >= 0).ok_or_else(|| invalid(format!("bad extent {d}")))
                                    })
                                    .collect::<Result<Vec<_>>>()
                            })
                            .collect::<Result<Vec<_>>>()?,
                    );
                }
                "device_index" => {
                    let vals = tagged(v, k, "list_int")?;
                    device_index = Some(
                        vals.iter()
                            .map(|x| {
                                x.as_i64()
                                    .and_then(|d| i32::try_from(d).ok())
                                    .ok_or_else(|| invalid("bad device_index"))
                            })
                            .collect::<Result<Vec<_>>>()?,
                    );
                }
                // TVM v0.9+: memory scopes; only global memory is supported here.
                "storage_scope" => {
                    for sc in tagged(v, k, "list_str")? {
                        let sc = sc.as_str().ok_or_else(|| invalid("storage_scope values must be strings"))?;
                        if !matches!(sc, "" | "global") {
                            return Err(unsupported_storage_scope(sc));
                        }
                    }
                }
                other => {
                    let tag = v.as_array().and_then(|a| a.first()).and_then(Json::as_str);
                    if !matches!(tag, Some("list_int") | Some("size_t")) {
                        return Err(invalid(format!("cannot skip graph attr {other}")));
                    }
                }
            }
        }
        let g = Graph {
            dltype: dltype.ok_or_else(|| missing("attrs.dltype"))?,
            storage_id: storage_id.ok_or_else(|| missing("attrs.storage_id"))?,
            shape: shape.ok_or_else(|| missing("attrs.shape"))?,
            device_index,
            nodes,
            arg_nodes,
            node_row_ptr,
            heads,
        };
        g.check()?;
        Ok(g)
    }

    /// Number of data entries.
    pub fn num_entries(&self) -> usize {
        self.node_row_ptr.last().copied().unwrap_or(0) as usize
    }

    /// Entry id of output `index` of `node`.
    pub fn entry_id(&self, e: NodeEntry) -> usize {
        self.node_row_ptr[e.node_id as usize] as usize + e.index as usize
    }

    /// Consistency checks TVM leaves to undefined behaviour.
    fn check(&self) -> Result<()> {
        let n = self.nodes.len();
        if self.node_row_ptr.len() != n + 1 {
            return Err(invalid(format!("node_row_ptr has {} elements for {n} nodes", self.node_row_ptr.len())));
        }
        if self.node_row_ptr.windows(2).any(|w| w[0] > w[1]) || self.node_row_ptr.first() != Some(&0) {
            return Err(invalid("node_row_ptr must start at 0 and not decrease"));
        }
        let ne = self.num_entries();
        for (what, len) in
            [("dltype", self.dltype.len()), ("storage_id", self.storage_id.len()), ("shape", self.shape.len())]
        {
            if len != ne {
                return Err(invalid(format!("attrs.{what} has {len} values for {ne} entries")));
            }
        }
        if let Some(d) = &self.device_index {
            if d.len() != ne {
                return Err(invalid(format!("attrs.device_index has {} values for {ne} entries", d.len())));
            }
        }
        let check_entry = |e: &NodeEntry, ctx: &str| -> Result<()> {
            let nid = e.node_id as usize;
            if nid >= n {
                return Err(invalid(format!("{ctx}: node {nid} out of range ({n} nodes)")));
            }
            let outs = self.node_row_ptr[nid + 1] - self.node_row_ptr[nid];
            if e.index >= outs {
                return Err(invalid(format!("{ctx}: node {} has no output {}", self.nodes[nid].name, e.index)));
            }
            Ok(())
        };
        for (i, node) in self.nodes.iter().enumerate() {
            for e in &node.inputs {
                check_entry(e, &format!("input of node {}", node.name))?;
                if e.node_id as usize >= i {
                    return Err(invalid(format!("node {} reads node {} which comes later", node.name, e.node_id)));
                }
            }
            if node.op == "tvm_op" {
                let outs = self.node_row_ptr[i + 1] - self.node_row_ptr[i];
                if node.attrs.num_outputs > outs {
                    return Err(invalid(format!(
                        "node {} declares {} outputs but has {outs} entries",
                        node.name, node.attrs.num_outputs
                    )));
                }
            }
        }
        for e in &self.heads {
            check_entry(e, "heads")?;
        }
        for &a in &self.arg_nodes {
            if a as usize >= n {
                return Err(invalid(format!("arg_nodes: node {a} out of range")));
            }
        }
        Ok(())
    }
}

/// The error for a graph memory scope other than global memory: texture scopes came with TVM
/// v0.9's OpenCL texture support.
fn unsupported_storage_scope(scope: &str) -> Error {
    Error::value(format!(
        "the graph stores an entry in memory scope {scope:?}: texture memory (TVM v0.9+, OpenCL) is not \
         supported by this runtime"
    ))
}

/// A small example graph (for tests).
#[cfg(test)]
pub(crate) fn tests_example() -> &'static str {
    tests::EXAMPLE
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) const EXAMPLE: &str = r#"{
      "nodes": [
        {"op": "null", "name": "x", "inputs": []},
        {"op": "null", "name": "w", "inputs": []},
        {"op": "tvm_op", "name": "mul0",
         "attrs": {"func_name": "f_mul", "num_inputs": "2", "num_outputs": "1", "flatten_data": "0", "hash": "ab"},
         "inputs": [[0, 0, 0], [1, 0, 0]]},
        {"op": "tvm_op", "name": "reshape_nop",
         "attrs": {"func_name": "__nop", "num_inputs": "1", "num_outputs": "1", "flatten_data": "0"},
         "inputs": [[2, 0, 0]]}
      ],
      "arg_nodes": [0, 1],
      "node_row_ptr": [0, 1, 2, 3, 4],
      "heads": [[3, 0, 0]],
      "attrs": {
        "dltype": ["list_str", ["float32", "float32", "float32", "float32"]],
        "storage_id": ["list_int", [0, 1, 2, 2]],
        "shape": ["list_shape", [[1, 8], [1, 8], [1, 8], [8]]],
        "dtype": ["list_int", [0, 0, 0, 0]]
      },
      "metadata": {"anything": 1},
      "after_metadata_is_ignored": true
    }"#;

    #[test]
    fn parses_the_example() {
        let g = Graph::parse(EXAMPLE).unwrap();
        assert_eq!(g.nodes.len(), 4);
        assert_eq!(g.num_entries(), 4);
        assert_eq!(g.nodes[2].attrs.func_name, "f_mul");
        assert_eq!(g.nodes[2].attrs.extra["hash"], "ab");
        assert_eq!(g.storage_id, vec![0, 1, 2, 2]);
        assert_eq!(g.entry_id(g.heads[0]), 3);
    }

    #[test]
    fn rejects_bad_graphs() {
        let cases = [
            (EXAMPLE.replace("\"arg_nodes\": [0, 1],", ""), "missing arg_nodes"),
            (EXAMPLE.replace("\"metadata\"", "\"bogus\""), "key bogus is not supported"),
            (EXAMPLE.replace("\"flatten_data\": \"0\", \"hash\"", "\"hash\""), "must contain func_name"),
            (EXAMPLE.replace("[[2, 0, 0]]", "[[9, 0, 0]]"), "out of range"),
            (EXAMPLE.replace("[0, 1, 2, 2]", "[0, 1, 2]"), "storage_id has 3 values"),
            (
                EXAMPLE.replace(
                    "\"float32\", \"float32\", \"float32\", \"float32\"",
                    "\"float32\", \"f\", \"float32\", \"float32\"",
                ),
                "unknown type f",
            ),
            (EXAMPLE.replace("\"inputs\": []}", "\"inputs\": [], \"extra\": 1}"), "do not support key extra"),
            (EXAMPLE.replace("[0, 1, 2, 3, 4]", "[0, 1, 2, 3]"), "node_row_ptr has 4 elements"),
            ("not json".to_owned(), "invalid graph JSON"),
        ];
        for (text, want) in cases {
            let e = Graph::parse(&text).unwrap_err().to_string();
            assert!(e.contains(want), "{want}: {e}");
        }
    }
}
