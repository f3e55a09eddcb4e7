use super::*;

#[test]
fn providers_are_judged_by_every_name() {
    assert!(provider_is_software("tcp;ofi_rxm").is_ok());
    assert!(provider_is_software("sockets").is_ok());
    assert!(provider_is_software(" udp ; ofi_rxd ").is_ok());
    assert!(provider_is_software("verbs;ofi_rxm").unwrap_err().contains("'verbs'"));
    assert!(provider_is_software("cxi").is_err());
    assert!(provider_is_software("^verbs").is_err());
    assert!(provider_is_software(";").is_err());
}

#[test]
fn maps_lines_are_parsed() {
    let anon = "7f0000000000-7f0020000000 rw-p 00000000 00:00 0 ";
    assert_eq!(parse_maps_line(anon), Some((0x7f00_0000_0000, 0x7f00_2000_0000, "rw-p", true)));
    let file = "55d0c0a00000-55d0c0a21000 r--p 00000000 fe:01 1234  /usr/bin/cat";
    assert_eq!(parse_maps_line(file), Some((0x55d0_c0a0_0000, 0x55d0_c0a2_1000, "r--p", false)));
    let named = "7ffd1000-7ffd2000 rw-p 00000000 00:00 0  [stack]";
    assert_eq!(parse_maps_line(named).map(|(.., anonymous)| anonymous), Some(false));
    assert_eq!(parse_maps_line("garbage"), None);
}

#[test]
fn bounds_are_found_by_bisection() {
    let inside = |a: usize| (1000..=5000).contains(&a);
    assert_eq!(lowest(0, 3000, inside), 1000);
    assert_eq!(lowest(1000, 3000, inside), 1000);
    assert_eq!(lowest(999, 1000, inside), 1000);
    assert_eq!(highest(3000, 9000, inside), 5000);
    assert_eq!(highest(3000, 5000, inside), 5000);
    assert_eq!(highest(5000, 5001, inside), 5000);
}

/// The move keeps every byte in use, and a second mapping of the file (as another PE
/// makes) sees writes through the first, both ways.
#[test]
fn a_moved_region_keeps_its_content_and_is_shared() {
    let page = page_size();
    let len = 64 * page;
    // SAFETY: a fresh anonymous mapping of our own.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(base, libc::MAP_FAILED);
    let base = base as usize;
    let bytes = |at: usize| at as *mut u8;
    // Touch every third page with a value that names it; leave the rest untouched.
    for p in (0..64).step_by(3) {
        // SAFETY: inside the mapping.
        unsafe { bytes(base + p * page + 7).write(p as u8 + 1) };
    }
    let file = move_onto_memfd(base, len).expect("moved");
    for p in 0..64 {
        let expected = if p % 3 == 0 { p as u8 + 1 } else { 0 };
        // SAFETY: inside the mapping, now the file's.
        assert_eq!(unsafe { bytes(base + p * page + 7).read() }, expected, "page {p}");
    }
    assert!(file.set_len(len as u64 / 2).is_err(), "the file is sealed against shrinking");
    let fd = file.as_raw_fd() as u64;
    let meta = file.metadata().expect("fstat");
    let identity = (meta.dev(), meta.ino());
    let me = u64::from(std::process::id());
    let other = map_peer(me, fd, len, identity).expect("mapped again");
    // SAFETY: both mappings are `len` bytes of the same file.
    unsafe {
        bytes(base + 5 * page).write(0xa5);
        assert_eq!(bytes(other + 5 * page).read(), 0xa5);
        bytes(other + 9 * page + 1).write(0x5a);
        assert_eq!(bytes(base + 9 * page + 1).read(), 0x5a);
        libc::munmap(other as *mut c_void, len);
        libc::munmap(base as *mut c_void, len);
    }
    assert!(map_peer(me, fd, len + page, identity).unwrap_err().contains("expected"));
    // Another file behind the same process and descriptor is refused.
    let wrong = (identity.0, identity.1 ^ 1);
    assert!(map_peer(me, fd, len, wrong).unwrap_err().contains("not the peer's heap file"));
}
