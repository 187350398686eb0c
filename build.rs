//! Sets the soname of the shared library, so that programs linked against it record
//! `libtvm_runtime.so` as TVM's own runtime does, and puts `libtvm_ffi.so` beside it as a link
//! to the same file (the tvm-ffi ABI's name: a process that loads both names holds one copy).
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtvm_runtime.so");
    // Test programs export the C API as a program linked against the library has it: TVM
    // v0.20+ kernel libraries call `TVMFFIErrorSetRaisedFromCStrParts` as an undefined symbol.
    println!("cargo:rustc-link-arg-tests=-Wl,--export-dynamic");
    println!("cargo:rerun-if-changed=build.rs");
    // OUT_DIR is <target>/<profile>/build/<pkg>-<hash>/out: the library lands in <target>/<profile>.
    if let Some(profile_dir) = std::env::var_os("OUT_DIR")
        .map(std::path::PathBuf::from)
        .and_then(|p| p.ancestors().nth(3).map(|d| d.to_path_buf()))
    {
        let link = profile_dir.join("libtvm_ffi.so");
        if std::fs::symlink_metadata(&link).is_err() {
            #[cfg(unix)]
            let _ = std::os::unix::fs::symlink("libtvm_runtime.so", &link);
        }
    }
}
