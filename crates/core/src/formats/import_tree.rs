//! The import tree of a serialized module tree, as both of TVM's formats store it: the classic
//! blob's `_import_tree` (`__tvm_dev_mblob`, read by the classic crate's `module::blob`) and tvm-ffi's
//! `__tvm_ffi__library_bin` ([`super::library_bin`]) write the same CSR arrays, row pointers
//! then child indices, over modules numbered from the root, 0.
//!
//! TVM's writer numbers the modules in the order a depth-first walk with an explicit stack pops
//! them, so a module's imports may carry smaller indices than itself and need not rise (a root
//! importing `[a, b]` writes `[2, 1]`); a module imported twice appears twice. What it never
//! writes, and what [`check`] refuses because loading would recurse forever or blow up: an index
//! out of range, a cycle, a module imported by nobody, a root that is imported, a chain deeper
//! than [`MAX_IMPORT_DEPTH`], or more than [`MAX_IMPORT_PATHS`] modules once shared imports are
//! unfolded.

use crate::error::{Error, Result};

/// The deepest import chain an import tree may build (TVM's exports nest 3 deep).
pub const MAX_IMPORT_DEPTH: usize = 256;

/// The most modules an import tree may unfold to, counting a module imported along several
/// paths once per path (what a failed function lookup visits).
pub const MAX_IMPORT_PATHS: u64 = 1 << 16;

/// Checks an import tree (CSR `row_ptr`/`child` over `n` modules): shape, index ranges, no
/// cycles, and exactly one root, module 0. Returns each module's children.
pub fn check<K: AsRef<str>>(n: usize, row_ptr: &[u64], child: &[u64], keys: &[K]) -> Result<Vec<Vec<usize>>> {
    if keys.len() != n {
        return Err(Error::value(format!("import tree: {} module kinds for {n} modules", keys.len())));
    }
    if n == 0 {
        return Err(Error::value("modules cannot be empty when import tree is present"));
    }
    if row_ptr.len() != n + 1 {
        return Err(Error::value(format!(
            "import tree: {} row pointers for {n} modules (expected {})",
            row_ptr.len(),
            n + 1
        )));
    }
    let bad = |m: String| Error::value(format!("import tree: {m}"));
    if row_ptr[0] != 0 || row_ptr[n] != child.len() as u64 {
        return Err(bad(format!(
            "row pointers must run from 0 to the number of child indices ({}), not {} to {}",
            child.len(),
            row_ptr[0],
            row_ptr[n]
        )));
    }
    // Every row must be checked before any is used: with the ends pinned to 0 and the child
    // count, non-decreasing pointers keep every row inside `child`.
    if let Some(i) = row_ptr.windows(2).position(|w| w[0] > w[1]) {
        return Err(bad(format!("row pointers decrease at module {i} ({} > {})", row_ptr[i], row_ptr[i + 1])));
    }
    let mut children = Vec::with_capacity(n);
    let mut indegree = vec![0usize; n];
    for i in 0..n {
        let (a, b) = (row_ptr[i], row_ptr[i + 1]);
        let kids = child[a as usize..b as usize]
            .iter()
            .map(|&c| {
                usize::try_from(c).ok().filter(|&c| c < n).ok_or_else(|| {
                    bad(format!("module {i} ({}) imports module {c}, but there are only {n} modules", keys[i].as_ref()))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        for &c in &kids {
            indegree[c] += 1;
        }
        children.push(kids);
    }
    // Cycles: iterative depth-first search with three colours; `finished` is the post-order.
    let mut state = vec![0u8; n]; // 0 new, 1 on the stack, 2 done
    let mut finished = Vec::with_capacity(n);
    for start in 0..n {
        if state[start] != 0 {
            continue;
        }
        let mut stack = vec![(start, 0usize)];
        state[start] = 1;
        while let Some(&mut (v, ref mut next)) = stack.last_mut() {
            if let Some(&c) = children[v].get(*next) {
                *next += 1;
                match state[c] {
                    0 => {
                        state[c] = 1;
                        stack.push((c, 0));
                    }
                    1 => {
                        return Err(bad(format!(
                            "cycle: module {v} ({}) imports module {c} ({}), which imports it back",
                            keys[v].as_ref(),
                            keys[c].as_ref()
                        )))
                    }
                    _ => {}
                }
            } else {
                state[v] = 2;
                finished.push(v);
                stack.pop();
            }
        }
    }
    if indegree[0] != 0 {
        return Err(bad(format!("module 0 ({}) must be the root, but another module imports it", keys[0].as_ref())));
    }
    if let Some(orphan) = (1..n).find(|&i| indegree[i] == 0) {
        return Err(bad(format!(
            "module {orphan} ({}) is imported by no module; the tree must have exactly one root, module 0",
            keys[orphan].as_ref()
        )));
    }
    // Nesting: lookups and releases walk the tree recursively, and a module imported along many
    // paths is walked once per path, so both the depth and the unfolded size are bounded.
    let mut paths = vec![0u64; n];
    let mut depth = vec![0usize; n];
    paths[0] = 1;
    for &v in finished.iter().rev() {
        for &c in &children[v] {
            paths[c] = paths[c].saturating_add(paths[v]);
            depth[c] = depth[c].max(depth[v] + 1);
        }
    }
    if let Some((deep, &d)) = depth.iter().enumerate().find(|(_, &d)| d > MAX_IMPORT_DEPTH) {
        return Err(bad(format!(
            "module {deep} ({}) is nested {d} imports deep, more than {MAX_IMPORT_DEPTH}",
            keys[deep].as_ref()
        )));
    }
    let unfolded = paths.iter().fold(0u64, |a, &p| a.saturating_add(p));
    if unfolded > MAX_IMPORT_PATHS {
        return Err(bad(format!(
            "modules imported along many paths unfold to {unfolded} modules, more than {MAX_IMPORT_PATHS}"
        )));
    }
    Ok(children)
}
