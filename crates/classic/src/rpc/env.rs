//! The server's file environment: the `tvm.rpc.server.*` globals (upload, download, remove,
//! listdir, workpath, load_module, download_linked_module) and the work directory of a session.
//!
//! A session served by this library's server has its own work directory, set for the serving
//! thread ([`SessionEnv`]). Elsewhere (TVM's Python server running on this library) the work
//! directory is what the registered `tvm.rpc.server.workpath` answers, as in TVM.
//!
//! Beyond TVM (apache/tvm#17377, #17382): every name is confined to the work directory. An
//! absolute name, a `..` component, or a path whose existing part resolves (through symlinks)
//! outside the directory is refused with an error.

use crate::error::{Error, Result};
use crate::module;
use crate::registry::{self, Registrar};
use crate::value::{Args, Value};
use std::cell::RefCell;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

/// The environment of one server session.
#[derive(Debug, Clone)]
pub struct SessionEnv {
    /// The session's work directory (absolute, resolved).
    pub work_dir: PathBuf,
    /// Whether to print what the session does.
    pub verbose: bool,
}

thread_local! {
    static CURRENT: RefCell<Option<SessionEnv>> = const { RefCell::new(None) };
}

/// Makes `env` the environment of the calling thread until the guard goes.
pub fn enter(env: SessionEnv) -> EnvGuard {
    let old = CURRENT.with(|c| c.borrow_mut().replace(env));
    EnvGuard(old)
}

/// Restores the previous environment when dropped.
pub struct EnvGuard(Option<SessionEnv>);

impl Drop for EnvGuard {
    fn drop(&mut self) {
        let old = self.0.take();
        CURRENT.with(|c| *c.borrow_mut() = old);
    }
}

fn current() -> Option<SessionEnv> {
    CURRENT.with(|c| c.borrow().clone())
}

fn log(msg: &str) {
    if current().is_some_and(|e| e.verbose) {
        eprintln!("[rpc] {msg}");
    }
}

/// Checks a client-given name: relative, no `..`, no NUL.
pub(crate) fn check_name(name: &str) -> Result<()> {
    if name.contains('\0') {
        return Err(Error::value(format!("RPC path {name:?} contains a NUL byte")));
    }
    let p = Path::new(name);
    if p.is_absolute() {
        return Err(Error::value(format!("RPC path {name:?} is absolute; paths are relative to the work directory")));
    }
    if p.components().any(|c| matches!(c, Component::ParentDir | Component::RootDir | Component::Prefix(_))) {
        return Err(Error::value(format!("RPC path {name:?} leaves the work directory")));
    }
    Ok(())
}

/// Whether `target` (which may not exist yet) lies inside `base` once symlinks are resolved.
pub(crate) fn confined(base: &Path, target: &Path) -> Result<bool> {
    let base = base.canonicalize().map_err(|e| Error::tvm(format!("work directory {}: {e}", base.display())))?;
    // The deepest part of the path that exists decides: what follows it is plain names.
    let mut p = target.to_path_buf();
    while p.symlink_metadata().is_err() {
        if !p.pop() {
            break;
        }
    }
    let resolved = p.canonicalize().map_err(|e| Error::tvm(format!("{}: {e}", p.display())))?;
    Ok(resolved.starts_with(&base))
}

fn workpath_global(name: &str) -> Result<String> {
    let f = registry::get("tvm.rpc.server.workpath").ok_or_else(|| Error::tvm("require tvm.rpc.server.workpath"))?;
    f.call(&[Value::str(name.to_owned())])?
        .as_str()
        .ok_or_else(|| Error::tvm("tvm.rpc.server.workpath must return a string"))
}

/// The work directory of the calling thread's session, or what the registered
/// `tvm.rpc.server.workpath` gives for "".
pub fn work_dir() -> Result<PathBuf> {
    match current() {
        Some(e) => Ok(e.work_dir),
        None => Ok(PathBuf::from(workpath_global("")?)),
    }
}

/// The path of a client-given name inside the work directory, refused when it would leave it.
/// An empty name or "." is the work directory itself.
pub fn resolve(name: &str) -> Result<PathBuf> {
    check_name(name)?;
    let (base, target) = match current() {
        Some(e) => {
            let t = if name.is_empty() { e.work_dir.clone() } else { e.work_dir.join(name) };
            (e.work_dir, t)
        }
        None => (PathBuf::from(workpath_global("")?), PathBuf::from(workpath_global(name)?)),
    };
    if !confined(&base, &target)? {
        return Err(Error::value(format!("RPC path {name:?} resolves outside the work directory")));
    }
    Ok(target)
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::tvm(format!("{what} {}: {e}", path.display()))
}

/// `tvm.rpc.server.upload(name, data)`.
pub fn upload(name: &str, data: &[u8]) -> Result<()> {
    if name.is_empty() || name == "." {
        return Err(Error::value("upload needs a file name"));
    }
    let p = resolve(name)?;
    std::fs::write(&p, data).map_err(|e| io_error("upload: cannot write", &p, e))?;
    log(&format!("upload {} ({} bytes)", p.display(), data.len()));
    Ok(())
}

/// `tvm.rpc.server.download(name)`.
pub fn download(name: &str) -> Result<Vec<u8>> {
    let p = resolve(name)?;
    let data = std::fs::read(&p).map_err(|e| io_error("download: cannot read", &p, e))?;
    log(&format!("Download {}... nbytes={}", p.display(), data.len()));
    Ok(data)
}

/// `tvm.rpc.server.remove(name)`: a file or an empty directory.
pub fn remove(name: &str) -> Result<()> {
    if name.is_empty() || name == "." {
        return Err(Error::value("remove needs a file name"));
    }
    let p = resolve(name)?;
    let md = p.symlink_metadata().map_err(|e| io_error("remove:", &p, e))?;
    let r = if md.is_dir() { std::fs::remove_dir(&p) } else { std::fs::remove_file(&p) };
    r.map_err(|e| io_error("remove: cannot remove", &p, e))
}

/// `tvm.rpc.server.listdir(name)`: the entries as `dir/entry,` each (TVM's format).
pub fn listdir(name: &str) -> Result<String> {
    let p = resolve(name)?;
    let rd = std::fs::read_dir(&p).map_err(|e| io_error("ListDir", &p, e))?;
    let dir = p.to_string_lossy().into_owned();
    let sep = if dir.ends_with('/') { "" } else { "/" };
    let mut names: Vec<String> =
        rd.filter_map(|e| e.ok()).map(|e| format!("{dir}{sep}{}", e.file_name().to_string_lossy())).collect();
    names.sort();
    Ok(names.iter().map(|n| format!("{n},")).collect())
}

fn run(cmd: &mut Command) -> Result<()> {
    let out = cmd.output().map_err(|e| Error::tvm(format!("cannot run {cmd:?}: {e}")))?;
    if !out.status.success() {
        return Err(Error::tvm(format!(
            "{cmd:?} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(())
}

/// Links `.o` and `.tar` uploads into a shared library next to them (`BuildSharedLibrary`);
/// other files are returned as they are. The compiler is `$CXX`, else `g++`.
pub(crate) fn build_shared_library(path: &Path) -> Result<PathBuf> {
    let s = path.to_string_lossy();
    let cc = std::env::var("CXX").unwrap_or_else(|_| "g++".to_owned());
    let out = PathBuf::from(format!("{s}.so"));
    if s.ends_with(".o") {
        run(Command::new(&cc).args(["-shared", "-fPIC", "-o"]).arg(&out).arg(path))?;
        Ok(out)
    } else if s.ends_with(".tar") {
        let dir = PathBuf::from(format!("{}.untar", s.trim_end_matches(".tar")));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| io_error("cannot create", &dir, e))?;
        run(Command::new("tar").arg("-C").arg(&dir).arg("-xf").arg(path))?;
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map_err(|e| io_error("ListDir", &dir, e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        files.sort();
        let r = run(Command::new(&cc).args(["-shared", "-fPIC", "-o"]).arg(&out).args(&files));
        let _ = std::fs::remove_dir_all(&dir);
        r.map(|()| out)
    } else {
        Ok(path.to_path_buf())
    }
}

/// `tvm.rpc.server.load_module(name)`.
pub(crate) fn load_module(name: &str) -> Result<module::Module> {
    let p = build_shared_library(&resolve(name)?)?;
    let m = module::load_from_file(&p.to_string_lossy(), "")?;
    log(&format!("Load module from {} ...", p.display()));
    Ok(m)
}

fn name_arg(a: &Args<'_>, what: &str) -> Result<String> {
    a.expect_at_least(what, 1)?;
    a.string(0)
}

/// Registers the `tvm.rpc.server.*` file globals.
pub fn register(r: &mut Registrar<'_>) {
    r.func("tvm.rpc.server.workpath", |a| {
        let name = name_arg(a, "tvm.rpc.server.workpath")?;
        let e = current().ok_or_else(|| {
            Error::tvm("tvm.rpc.server.workpath: no work directory (not inside an RPC server session)")
        })?;
        Ok(Value::str(e.work_dir.join(name).to_string_lossy().into_owned()))
    });
    r.func("tvm.rpc.server.upload", |a| {
        a.expect_len("tvm.rpc.server.upload", 2)?;
        upload(&a.string(0)?, &a.bytes(1)?)?;
        Ok(Value::Null)
    });
    r.func("tvm.rpc.server.download", |a| Ok(Value::bytes(download(&name_arg(a, "tvm.rpc.server.download")?)?)));
    r.func("tvm.rpc.server.remove", |a| {
        remove(&name_arg(a, "tvm.rpc.server.remove")?)?;
        Ok(Value::Null)
    });
    r.func("tvm.rpc.server.listdir", |a| Ok(Value::str(listdir(&name_arg(a, "tvm.rpc.server.listdir")?)?)));
    r.func("tvm.rpc.server.load_module", |a| {
        Ok(Value::Module(load_module(&name_arg(a, "tvm.rpc.server.load_module")?)?))
    });
    r.func("tvm.rpc.server.download_linked_module", |a| {
        let p = build_shared_library(&resolve(&name_arg(a, "tvm.rpc.server.download_linked_module")?)?)?;
        let data = std::fs::read(&p).map_err(|e| io_error("cannot read", &p, e))?;
        log(&format!("Send linked module {} to client", p.display()));
        Ok(Value::bytes(data))
    });
}
