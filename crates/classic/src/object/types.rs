//! The type table: keys, parents and indices of object types.

use super::index;
use crate::error::{Error, Result};
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::OnceLock;

struct TypeInfo {
    key: String,
    parent: u32,
    num_child_slots: u32,
    num_children: u32,
}

struct Table {
    infos: Vec<TypeInfo>,
    by_key: HashMap<String, u32>,
}

fn table() -> &'static RwLock<Table> {
    static T: OnceLock<RwLock<Table>> = OnceLock::new();
    T.get_or_init(|| {
        let mut t = Table { infos: Vec::new(), by_key: HashMap::new() };
        let statics = [
            "runtime.Object",
            "runtime.Module",
            "runtime.NDArray",
            "runtime.String",
            "Array",
            "Map",
            "runtime.ShapeTuple",
            "runtime.Closure",
            "runtime.ADT",
        ];
        for (i, key) in statics.iter().enumerate() {
            t.infos.push(TypeInfo { key: (*key).into(), parent: 0, num_child_slots: 0, num_children: 0 });
            if i != 0 {
                t.by_key.insert((*key).into(), i as u32);
                t.infos[0].num_children += 1;
            }
        }
        // Dynamic types of the reference build, in its order (only the keys are stable).
        for (key, parent) in [
            ("TimerNode", "runtime.Object"),
            ("DefaultTimerNode", "TimerNode"),
            ("CPUTimerNode", "TimerNode"),
            ("runtime.profiling.Duration", "runtime.Object"),
            ("runtime.profiling.Percent", "runtime.Object"),
            ("runtime.profiling.Count", "runtime.Object"),
            ("runtime.profiling.Report", "runtime.Object"),
            ("runtime.profiling.DeviceWrapper", "runtime.Object"),
            ("runtime.profiling.MetricCollector", "runtime.Object"),
            ("vm.Closure", "runtime.Closure"),
        ] {
            insert(&mut t, key, parent);
        }
        debug_assert_eq!(t.by_key["TimerNode"], index::DYNAMIC);
        RwLock::new(t)
    })
}

fn insert(t: &mut Table, key: &str, parent_key: &str) -> u32 {
    if let Some(&i) = t.by_key.get(key) {
        return i;
    }
    let parent = if parent_key == "runtime.Object" { 0 } else { t.by_key.get(parent_key).copied().unwrap_or(0) };
    let idx = t.infos.len() as u32;
    t.infos.push(TypeInfo { key: key.into(), parent, num_child_slots: 0, num_children: 0 });
    t.by_key.insert(key.into(), idx);
    t.infos[parent as usize].num_children += 1;
    idx
}

/// Registers (or finds) a dynamic type under `parent_key`; returns its index.
pub(crate) fn register_type(key: &str, parent_key: &str) -> u32 {
    insert(&mut table().write(), key, parent_key)
}

/// `TVMObjectTypeKey2Index`: `runtime.Object` itself is not resolvable, as in TVM.
pub fn type_key2index(key: &str) -> Result<u32> {
    table().read().by_key.get(key).copied().ok_or_else(|| {
        Error::tvm(format!("Cannot find type {key}. Did you forget to register the node by TVM_REGISTER_NODE_TYPE ?"))
    })
}

/// `TVMObjectTypeIndex2Key`.
pub fn type_index2key(tindex: u32) -> Result<String> {
    table()
        .read()
        .infos
        .get(tindex as usize)
        .map(|i| i.key.clone())
        .ok_or_else(|| Error::index(format!("Unknown type index {tindex}")))
}

/// `TVMObjectDerivedFrom`.
pub fn derived_from(child: u32, parent: u32) -> Result<bool> {
    if child == parent {
        return Ok(true);
    }
    if child < parent {
        return Ok(false);
    }
    let t = table().read();
    if child as usize >= t.infos.len() {
        return Err(Error::index(format!("Unknown type index {child}")));
    }
    let mut cur = child;
    while cur > parent {
        cur = t.infos[cur as usize].parent;
    }
    Ok(cur == parent)
}

/// `runtime.DumpTypeTable`: one line per type with at least `min_children` children, to stderr.
pub(crate) fn dump_type_table(min_children: i64) -> String {
    let t = table().read();
    let mut out = String::new();
    for (i, info) in t.infos.iter().enumerate() {
        if i64::from(info.num_children) < min_children {
            continue;
        }
        let parent_key = if i == 0 { "runtime.Object" } else { t.infos[info.parent as usize].key.as_str() };
        out.push_str(&format!(
            "[{i}] {}\tparent={parent_key}\tnum_child_slots={}\tnum_children={}\n",
            info.key, info.num_child_slots, info.num_children
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_indices_and_lookups() {
        assert_eq!(type_key2index("runtime.NDArray").unwrap(), 2);
        assert_eq!(type_key2index("Array").unwrap(), 4);
        assert_eq!(type_key2index("Map").unwrap(), 5);
        assert!(type_key2index("runtime.Object").is_err());
        assert!(type_key2index("runtime.Array").is_err());
        assert!(type_key2index("IRModule").is_err());
        assert_eq!(type_index2key(0).unwrap(), "runtime.Object");
        assert_eq!(type_index2key(8).unwrap(), "runtime.ADT");
        assert!(type_index2key(100_000).is_err());
        let vm = type_key2index("vm.Closure").unwrap();
        assert!(derived_from(vm, index::CLOSURE).unwrap());
        assert!(derived_from(vm, 0).unwrap());
        assert!(!derived_from(vm, index::ADT).unwrap());
        assert!(!derived_from(3, 5).unwrap());
        assert!(derived_from(100_000, 3).is_err());
        let t = register_type("test.Thing", "runtime.Object");
        assert_eq!(register_type("test.Thing", "runtime.Object"), t);
        assert!(dump_type_table(0).contains("test.Thing\tparent=runtime.Object"));
    }
}
