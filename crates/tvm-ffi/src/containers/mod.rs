//! tvm-ffi's containers, with the layouts its C++ headers read and write inline: `ffi.Array`
//! ([`array`]), `ffi.List` ([`list`]), `ffi.Map` and `ffi.Dict` ([`map`], over the raw layout
//! of [`map_raw`]), `ffi.Shape` ([`shape`]), the key hashing and equality of maps ([`hash`]) and
//! the `ffi.*` container globals ([`globals`]).

pub mod array;
pub mod functions;
pub mod hash;
pub mod list;
pub mod map;
pub(crate) mod map_raw;
pub mod shape;

pub use array::{make_array, seq_items};
pub use hash::{any_equal, any_hash};
pub use list::{list_items, make_list};
pub use map::{dict_set, make_dict, make_map, map_get, map_items, map_set, map_size};
pub use shape::{make_shape, shape_dims};

use super::registry::Builder;

/// Adds the container globals.
pub fn register(b: &mut Builder) {
    functions::register(b);
}
