//! Errors, functions, the global registry and modules (`c_runtime_api.h`).

use super::guard::{guard, guard_hot, guard_void};
use super::handle::{self, cstr, out};
use super::ret;
use crate::abi::{DLTensor, TVMValue};
use crate::error::{self, Error};
use crate::function::PackedFunc;
use crate::module;
use crate::ndarray::NDArray;
use crate::object::{self, index, ObjectHeader, ObjectRef};
use crate::registry;
use crate::value::{code, Args, Value, NDARRAY_HANDLE_OFFSET};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CString};

/// Type of `tvm_index_t`.
#[expect(non_camel_case_types, reason = "TVM C ABI name")]
pub type tvm_index_t = i64;
/// Handle to an NDArray: the `DLTensor` inside its container.
pub type TVMArrayHandle = *mut DLTensor;
/// Handle to a module.
pub type TVMModuleHandle = *mut c_void;
/// Handle to a packed function.
pub type TVMFunctionHandle = *mut c_void;
/// Handle to the return value slot of a callback.
pub type TVMRetValueHandle = *mut c_void;
/// Handle to a device stream.
pub type TVMStreamHandle = *mut c_void;
/// Handle to an object.
pub type TVMObjectHandle = *mut c_void;

/// C function that can be wrapped as a packed function.
pub type TVMPackedCFunc = Option<
    unsafe extern "C" fn(
        args: *mut TVMValue,
        type_codes: *mut c_int,
        num_args: c_int,
        ret: TVMRetValueHandle,
        resource_handle: *mut c_void,
    ) -> c_int,
>;

/// Finalizer of the resource of a [`TVMPackedCFunc`].
pub type TVMPackedCFuncFinalizer = Option<unsafe extern "C" fn(resource_handle: *mut c_void)>;

/// Signature of extension function declarers.
pub type TVMExtensionFuncDeclarer = Option<unsafe extern "C" fn(register_func_handle: TVMFunctionHandle) -> c_int>;

/// Sets this thread's last error (used by callbacks and generated code before returning -1).
/// # Ownership
/// `msg`: borrowed for the call (copied); NULL is taken as "".
/// # Safety
/// `msg` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn TVMAPISetLastError(msg: *const c_char) {
    guard_void(|| {
        let text = if msg.is_null() {
            String::new()
        } else {
            // SAFETY: NUL-terminated per contract.
            unsafe { std::ffi::CStr::from_ptr(msg) }.to_string_lossy().into_owned()
        };
        error::set_last_error(&text);
    })
}

/// The last error of this thread ("" before any).
/// # Ownership
/// The result is thread-local, valid until the next error is set on this thread.
#[no_mangle]
pub extern "C" fn TVMGetLastError() -> *const c_char {
    error::last_error_ptr()
}

/// Loads a module from a file; `format` "" means "from the file's extension".
/// # Ownership
/// `file_name`, `format`: borrowed for the call. `*out`: owned by caller (free with `TVMModFree`).
/// # Safety
/// Strings are NUL-terminated; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMModLoadFromFile(
    file_name: *const c_char,
    format: *const c_char,
    out: *mut TVMModuleHandle,
) -> c_int {
    guard(|| {
        super::slots::install()?;
        // SAFETY: per contract.
        let path = unsafe { cstr(file_name, "file_name")? };
        // SAFETY: per contract.
        let fmt = if format.is_null() { "" } else { unsafe { cstr(format, "format")? } };
        // SAFETY: per contract.
        let slot = unsafe { handle::out(out, "out")? };
        let m = module::load_from_file(path, fmt)?;
        slot.write(m.into_object().into_raw().cast());
        Ok(())
    })
}

/// Adds `dep` to `mod_`'s imports.
/// # Ownership
/// Both borrowed for the call; the import holds its own reference.
/// # Safety
/// Both are live module handles.
#[no_mangle]
pub unsafe extern "C" fn TVMModImport(mod_: TVMModuleHandle, dep: TVMModuleHandle) -> c_int {
    guard(|| {
        // SAFETY: per contract.
        let m = unsafe { handle::module(mod_)? };
        // SAFETY: per contract.
        let d = unsafe { handle::module(dep)? };
        if m.type_key() == "rpc" {
            let f = registry::get_required("rpc.ImportRemoteModule")?;
            f.call(&[Value::Module(m), Value::Module(d)])?;
            return Ok(());
        }
        m.import(d)
    })
}

/// Looks up a function in a module (and its imports if `query_imports != 0`).
/// # Ownership
/// `mod_`, `func_name`: borrowed for the call. `*out`: owned by caller (free with `TVMFuncFree`),
/// or NULL if absent; left untouched on error.
/// # Safety
/// `mod_` is live, `func_name` NUL-terminated, `out` writable.
#[no_mangle]
pub unsafe extern "C" fn TVMModGetFunction(
    mod_: TVMModuleHandle,
    func_name: *const c_char,
    query_imports: c_int,
    out: *mut TVMFunctionHandle,
) -> c_int {
    guard(|| {
        // SAFETY: per contract.
        let m = unsafe { handle::module(mod_)? };
        // SAFETY: per contract.
        let name = unsafe { cstr(func_name, "func_name")? };
        // SAFETY: per contract.
        let slot = unsafe { handle::out(out, "out")? };
        let f = m.get_function(name, query_imports != 0)?;
        slot.write(f.map_or(std::ptr::null_mut(), PackedFunc::into_handle));
        Ok(())
    })
}

/// Releases a module reference (NULL accepted).
/// # Safety
/// `mod_` is NULL or an owned module handle, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn TVMModFree(mod_: TVMModuleHandle) -> c_int {
    // SAFETY: per contract.
    guard(|| unsafe {
        object::release_raw(handle::object_ptr(mod_));
        Ok(())
    })
}

/// Releases a function handle (NULL accepted).
/// # Safety
/// `func` is NULL or an owned function handle, not used afterwards (never one from
/// `TVMBackendGetFuncFromEnv`).
#[no_mangle]
pub unsafe extern "C" fn TVMFuncFree(func: TVMFunctionHandle) -> c_int {
    // SAFETY: per contract.
    guard(|| unsafe {
        PackedFunc::free_handle(func);
        Ok(())
    })
}

/// Calls a function. Strings and bytes come back through a thread-local slot; other results
/// are owned by the caller.
/// # Ownership
/// Arguments borrowed for the call. `*ret_val`/`*ret_type_code`: per the returned code; a
/// string or bytes result is thread-local, valid until the next call on this thread.
/// # Safety
/// `func` is live; the arrays hold `num_args` valid values; the out-pointers are writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFuncCall(
    func: TVMFunctionHandle,
    arg_values: *mut TVMValue,
    type_codes: *mut c_int,
    num_args: c_int,
    ret_val: *mut TVMValue,
    ret_type_code: *mut c_int,
) -> c_int {
    guard_hot(|| {
        // SAFETY: per contract.
        let f = unsafe { handle::func(func)? };
        // SAFETY: per contract.
        let args = unsafe { Args::from_raw(arg_values, type_codes, num_args)? };
        // SAFETY: per contract.
        let rv_slot = unsafe { out(ret_val, "ret_val")? };
        // SAFETY: per contract.
        let rc_slot = unsafe { out(ret_type_code, "ret_type_code")? };
        let mut rv = Value::Null;
        f.call_args(&args, &mut rv)?;
        let (v, c) = ret::to_c(rv)?;
        rv_slot.write(v);
        rc_slot.write(c);
        Ok(())
    })
}

/// Sets the return value of a callback (copied: the caller keeps what it passed).
/// # Safety
/// Called inside a `TVMPackedCFunc` with the `ret` it received; `value`/`type_code` point to
/// `num_ret` valid values.
#[no_mangle]
pub unsafe extern "C" fn TVMCFuncSetReturn(
    ret: TVMRetValueHandle,
    value: *mut TVMValue,
    type_code: *mut c_int,
    num_ret: c_int,
) -> c_int {
    guard_hot(|| {
        if num_ret != 1 {
            return Err(Error::tvm(format!("Check failed: num_ret == 1 ({num_ret} vs. 1)")));
        }
        // SAFETY: per contract.
        let slot = unsafe { handle::ret_slot(ret)? };
        if value.is_null() || type_code.is_null() {
            return Err(Error::value("TVMCFuncSetReturn: value and type_code must not be NULL"));
        }
        // SAFETY: per contract, one readable value and code.
        let (v, c) = unsafe { (*value, *type_code) };
        // Plain values are the common case (a callback returning an int or a handle).
        // SAFETY: the code says which union member is valid; other codes go through `Args`,
        // whose contract the caller's promise covers.
        let v = unsafe {
            match c {
                code::INT => Value::Int(v.v_int64),
                code::FLOAT => Value::Float(v.v_float64),
                code::HANDLE => Value::Handle(v.v_handle),
                code::NULL => Value::Null,
                code::DEVICE => Value::Device(v.v_device),
                _ => Args::from_raw(value, type_code, 1)?.get(0)?,
            }
        };
        slot.set(v);
        Ok(())
    })
}

/// Turns a borrowed callback argument into an owned value, in place.
/// # Safety
/// `value`/`code` point to one valid argument of the running callback.
#[no_mangle]
pub unsafe extern "C" fn TVMCbArgToReturn(value: *mut TVMValue, code: *mut c_int) -> c_int {
    guard(|| {
        // SAFETY: per contract.
        let (v, c) = unsafe { (handle::out(value, "value")?, handle::out(code, "code")?) };
        // SAFETY: both were initialised by the caller.
        let (mut val, mut tc) = unsafe { (v.assume_init_read(), c.assume_init_read()) };
        match tc {
            code::OBJECT | code::MODULE => {
                // SAFETY: these codes carry a live object header.
                unsafe { object::retain_raw(handle::object_ptr(val.v_handle)) };
            }
            code::NDARRAY => {
                // SAFETY: code 13 carries a live NDArray handle.
                unsafe { object::retain_raw(NDArray::header_of_handle(val.v_handle.cast())) };
            }
            code::FUNC => {
                // SAFETY: code 10 carries a live function handle.
                let f = unsafe { handle::func(val.v_handle)? }.clone();
                val.v_handle = f.into_handle();
            }
            code::RVALUE_REF => {
                // SAFETY: code 14 carries the address of a caller variable holding an object.
                let slot = unsafe { val.v_handle }.cast::<*mut ObjectHeader>();
                if slot.is_null() {
                    return Err(Error::value("rvalue reference to NULL"));
                }
                // SAFETY: as above; we take over its reference and clear the variable.
                let obj = unsafe { ObjectRef::from_raw(slot.replace(std::ptr::null_mut())) };
                match obj {
                    None => tc = code::NULL,
                    Some(o) => {
                        tc = match o.type_index() {
                            index::NDARRAY => code::NDARRAY,
                            index::MODULE => code::MODULE,
                            _ => code::OBJECT,
                        };
                        let p = o.into_raw().cast::<u8>();
                        val.v_handle =
                            if tc == code::NDARRAY { p.wrapping_add(NDARRAY_HANDLE_OFFSET) } else { p }.cast();
                    }
                }
            }
            code::STR | code::BYTES => {
                return Err(Error::type_error(format!(
                    "TVMCbArgToReturn: cannot convert {} to a return value",
                    crate::value::code_name(tc)
                )));
            }
            _ => {}
        }
        v.write(val);
        c.write(tc);
        Ok(())
    })
}

/// Wraps a C callback as a function; `fin(resource_handle)` runs once when the last copy goes.
/// # Ownership
/// `*out`: owned by caller (free with `TVMFuncFree`).
/// # Safety
/// `func` is a valid callback that never unwinds; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFuncCreateFromCFunc(
    func: TVMPackedCFunc,
    resource_handle: *mut c_void,
    fin: TVMPackedCFuncFinalizer,
    out: *mut TVMFunctionHandle,
) -> c_int {
    guard(|| {
        // SAFETY: per contract.
        let slot = unsafe { handle::out(out, "out")? };
        let f = func.ok_or_else(|| Error::value("TVMFuncCreateFromCFunc: func must not be NULL"))?;
        slot.write(PackedFunc::from_c(f, resource_handle, fin).into_handle());
        Ok(())
    })
}

/// Registers a copy of `f` as a global (the caller keeps its handle).
/// # Safety
/// `name` is NUL-terminated; `f` is live.
#[no_mangle]
pub unsafe extern "C" fn TVMFuncRegisterGlobal(name: *const c_char, f: TVMFunctionHandle, override_: c_int) -> c_int {
    guard(|| {
        // SAFETY: per contract.
        let name = unsafe { cstr(name, "name")? };
        // SAFETY: per contract.
        let f = unsafe { handle::func(f)? }.clone();
        registry::register(name, f, override_ != 0)
    })
}

/// Looks a global up.
/// # Ownership
/// `*out`: owned by caller (free with `TVMFuncFree`; leaking it is harmless), or NULL if absent.
/// # Safety
/// `name` is NUL-terminated; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFuncGetGlobal(name: *const c_char, out: *mut TVMFunctionHandle) -> c_int {
    guard(|| {
        super::slots::install()?;
        // SAFETY: per contract.
        let name = unsafe { cstr(name, "name")? };
        // SAFETY: per contract.
        let slot = unsafe { handle::out(out, "out")? };
        slot.write(registry::get(name).map_or(std::ptr::null_mut(), PackedFunc::into_handle));
        Ok(())
    })
}

struct NameList {
    names: Vec<CString>,
    ptrs: Vec<*const c_char>,
}

thread_local! {
    static NAMES: RefCell<NameList> = const { RefCell::new(NameList { names: Vec::new(), ptrs: Vec::new() }) };
}

/// Lists the names of all globals.
/// # Ownership
/// `*out_array` and its strings: thread-local, valid until the next call of this function on
/// this thread.
/// # Safety
/// Both out-pointers are writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFuncListGlobalNames(out_size: *mut c_int, out_array: *mut *mut *const c_char) -> c_int {
    guard(|| {
        // SAFETY: per contract.
        let (size_slot, array_slot) =
            unsafe { (handle::out(out_size, "out_size")?, handle::out(out_array, "out_array")?) };
        let names = registry::list_names();
        let n = c_int::try_from(names.len()).map_err(|_| Error::internal("too many globals"))?;
        NAMES.with(|list| {
            let mut list = list.borrow_mut();
            list.names = names.into_iter().filter_map(|s| CString::new(s).ok()).collect();
            list.ptrs = list.names.iter().map(|s| s.as_ptr()).collect();
            size_slot.write(n.min(list.ptrs.len() as c_int));
            array_slot.write(list.ptrs.as_mut_ptr());
        });
        Ok(())
    })
}

/// Removes a global (0 also when absent); outstanding handles stay valid.
/// # Safety
/// `name` is NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn TVMFuncRemoveGlobal(name: *const c_char) -> c_int {
    guard(|| {
        // SAFETY: per contract.
        registry::remove(unsafe { cstr(name, "name")? });
        Ok(())
    })
}
