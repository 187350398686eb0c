//! Unit tests of the page bookkeeping.

use super::paging::Pages;

#[test]
fn add_remove_frees_everything() {
    let mut p = Pages::new(16, 10, false, false);
    p.add_sequence(0).unwrap();
    assert!(p.add_sequence(0).is_err());
    p.remove_sequence(0).unwrap();
    assert_eq!(p.free_pages.len(), 10);
}
