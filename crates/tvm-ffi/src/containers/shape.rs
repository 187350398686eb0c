//! `ffi.Shape` (`shape.h`): the header, `TVMFFIShapeCell` (`data`, `size`), then the `int64_t`
//! dimensions in place (`data` points to them; shapes made by C++ code may point elsewhere).

use crate::object::{make_inplace_object, ObjectRef};
use crate::ti;

/// `TVMFFIShapeCell`.
#[repr(C)]
pub(crate) struct TVMFFIShapeCell {
    /// The dimensions.
    pub data: *const i64,
    /// How many.
    pub size: usize,
}

/// Makes an `ffi.Shape`.
pub fn make_shape(dims: &[i64]) -> ObjectRef {
    make_inplace_object(
        ti::SHAPE,
        std::mem::size_of_val(dims),
        |tail| {
            let dst = tail.cast::<i64>();
            // SAFETY: the tail has room for the dimensions (8-aligned).
            unsafe { std::ptr::copy_nonoverlapping(dims.as_ptr(), dst, dims.len()) };
            TVMFFIShapeCell { data: dst, size: dims.len() }
        },
        None,
    )
}

/// The dimensions of a shape object (empty for other objects).
pub fn shape_dims(o: &ObjectRef) -> &[i64] {
    if o.type_index() != ti::SHAPE {
        return &[];
    }
    // SAFETY: a shape holds its cell right after the header, pointing to `size` dimensions that
    // live as long as the object.
    unsafe {
        let c = o.payload::<TVMFFIShapeCell>();
        if c.size == 0 || c.data.is_null() {
            &[]
        } else {
            std::slice::from_raw_parts(c.data, c.size)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_round_trip() {
        let s = make_shape(&[2, 3, -1]);
        assert_eq!(s.type_index(), ti::SHAPE);
        assert_eq!(shape_dims(&s), &[2, 3, -1]);
        assert_eq!(shape_dims(&make_shape(&[])), &[] as &[i64]);
        // the dimensions sit right after the 40-byte object
        // SAFETY: reading the cell of the shape just made.
        let data = unsafe { s.payload::<TVMFFIShapeCell>().data };
        assert_eq!(data as usize, s.as_ptr() as usize + 40);
    }
}
