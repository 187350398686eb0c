//! Sets the soname of the shared library, so that programs linked against it record
//! `libtvm_runtime.so` as TVM's own runtime does, and makes it an auxiliary filter of
//! `libtvm_ffi.so` (looked for beside it, then where the loader looks): where that library is
//! present (or already loaded), every symbol of this one resolves to it, so that a process that
//! loads both names holds one runtime; where it is not, this library runs by itself.
//! `scripts/libtvm-ffi.sh` makes `libtvm_ffi.so` (its own soname, with the C++ API) in
//! `<profile>/ffi/`, and `cmake --install` ships it beside this one.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtvm_runtime.so");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--auxiliary=libtvm_ffi.so");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-rpath,$ORIGIN");
    println!("cargo:rerun-if-changed=build.rs");
    // OUT_DIR is <target>/<profile>/build/<pkg>-<hash>/out: the library lands in <target>/<profile>.
    if let Some(profile_dir) = std::env::var_os("OUT_DIR")
        .map(std::path::PathBuf::from)
        .and_then(|p| p.ancestors().nth(3).map(|d| d.to_path_buf()))
    {
        // Earlier builds linked `libtvm_ffi.so` to this library here: a file of that name whose
        // soname is libtvm_runtime.so, which programs linked against it would record. Gone.
        let link = profile_dir.join("libtvm_ffi.so");
        if std::fs::read_link(&link).is_ok_and(|t| t == std::path::Path::new("libtvm_runtime.so")) {
            let _ = std::fs::remove_file(&link);
        }
    }
}
