//! The symmetric heaps of the PEs on one node, mapped into each other by this library where
//! the implementation maps none (Sandia OpenSHMEM without XPMEM: `shmem_ptr` is NULL, every
//! same-node put is a `process_vm_writev` system call and every signal a libfabric message,
//! up to 10x MPI's time in the halo exchange, docs/bench/SOS.md).
//!
//! During `Runtime::init` each PE moves its own symmetric heap, in place, onto a memory file
//! (`memfd_create`): the pages in use are copied into the file, and the file is mapped over
//! the heap at the same addresses (`MAP_FIXED | MAP_SHARED`); a failed mapping puts anonymous
//! memory and the heap's content back before the PE refuses. The implementation sees the same
//! memory at the same addresses, and its own transfers (CMA, the libfabric provider's copies)
//! still land there. The PEs of a node then map each other's files (`/proc/PID/fd/N`, the
//! permission CMA needs anyway; each checked by the device and inode its owner published), and
//! `HeapLayout::remote` translates a symmetric address by its offset from each heap's base:
//! the direct path (copies, release stores, acquire loads) works as over `shmem_ptr`.
//!
//! Replacing the pages under a heap is safe only where nothing outside this process holds
//! them: a software transport (libfabric's `tcp`, `sockets`, `udp`, with `ofi_rxm` or
//! `ofi_rxd`), never a NIC that registered (pinned) the heap's pages, whose writes would land
//! in the pages replaced. [`transport_allows`] decides that from the provider the launch names
//! and from the devices the process holds open; [`NODE_HEAP`](crate::env::NODE_HEAP) overrides
//! it. Open MPI's OSHMEM, which maps its heaps itself, never moves them.
//!
//! Every step ends in an agreement of all PEs (an MPI reduction; the first agrees on the
//! setting itself), so the job maps as a whole or not at all, and no heap is written while it
//! moves.
// Only Sandia OpenSHMEM lacks a mapping; the mechanism and its tests compile everywhere.
#![cfg_attr(not(shmem_sos), allow(dead_code))]

use std::ffi::c_void;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::{FileExt, MetadataExt};

use mpi::collective::SystemOperation;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::CommunicatorCollectives;

use crate::env::NodeHeapSetting;

/// libfabric providers that copy with the CPU and register no memory with a device.
const SOFTWARE_PROVIDERS: &[&str] = &["tcp", "sockets", "udp", "ofi_rxm", "ofi_rxd"];

/// Device files whose presence among the process's open files means a NIC with its own
/// memory registration (InfiniBand and RoCE verbs, Omni-Path, Cray's Slingshot, Intel's
/// kfabric), or KNEM, a kernel module that pins pages for its copies.
const RDMA_DEVICES: &[&str] =
    &["/dev/infiniband/", "/dev/hfi", "/dev/cxi", "/dev/ipath", "/dev/qib", "/dev/kfi", "/dev/knem"];

/// The other PEs' heaps of this node, mapped into this process.
pub(crate) struct NodeHeap {
    /// This PE's heap: `base..base + len`, the same length on every PE.
    base: usize,
    len: usize,
    /// For every PE of the job, where its heap starts in this process (this PE's own: `base`).
    starts: Box<[Option<usize>]>,
}

impl NodeHeap {
    /// Where the symmetric address `local` (an address in this PE's heap) of PE `pe` is mapped
    /// into this process, if it is.
    pub(crate) fn translate(&self, local: usize, pe: usize) -> Option<usize> {
        let offset = local.checked_sub(self.base).filter(|&offset| offset < self.len)?;
        self.starts.get(pe).copied().flatten().map(|start| start + offset)
    }
}

impl Drop for NodeHeap {
    fn drop(&mut self) {
        for (pe, start) in self.starts.iter().enumerate() {
            match start {
                Some(start) if *start != self.base => {
                    // SAFETY: `start` is a mapping of `len` bytes made by `map_peer` and owned by
                    // this value; the runtime drops it after every symmetric object is gone.
                    let failed = unsafe { libc::munmap(*start as *mut c_void, self.len) } != 0;
                    debug_assert!(!failed, "unmapping PE {pe}'s heap failed");
                }
                _ => {}
            }
        }
    }
}

/// What came of mapping the node's heaps.
pub(crate) enum Outcome {
    /// Every PE maps the heaps of its node's PEs through this module.
    Mapped(NodeHeap),
    /// The implementation maps the PEs of a node itself (`shmem_ptr`); nothing was moved.
    Implementation,
    /// Not mapped; why, in words for a user.
    NotMapped(String),
}

/// Maps the heaps of the PEs on each node into each other.
///
/// `first_block` is a live symmetric block (the runtime's first), `heap_bounds` finds this
/// PE's heap around it.
///
/// # Collective
/// Every PE of `world` calls it at the same point of initialisation, before any transfer
/// into symmetric memory, with the same `setting`. With [`NodeHeapSetting::On`] a failure on any PE
/// is returned on every PE.
pub(crate) fn collective_map(
    world: &SimpleCommunicator,
    setting: NodeHeapSetting,
    first_block: usize,
    heap_bounds: impl FnOnce(usize) -> Result<(usize, usize), String>,
) -> Result<Outcome, String> {
    let me = world.rank() as usize;
    let node = world.split_shared(0);
    let mut world_ranks = vec![0i32; node.size() as usize];
    node.all_gather_into(&world.rank(), &mut world_ranks[..]);

    // 0. The setting itself: PEs that read different values would take different branches
    // below and wait in different collectives.
    let code = match setting {
        NodeHeapSetting::Auto => 0,
        NodeHeapSetting::On => 1,
        NodeHeapSetting::Off => 2,
    };
    let (mut lowest, mut highest) = (0i64, 0i64);
    world.all_reduce_into(&code, &mut lowest, SystemOperation::min());
    world.all_reduce_into(&code, &mut highest, SystemOperation::max());
    if lowest != highest {
        return Err(format!(
            "{} differs between the PEs (this PE's is {setting:?}): set it the same for every PE",
            crate::env::NODE_HEAP
        ));
    }

    // 1. Whether to try at all. A PE alone on its node has nothing to map but takes part in
    // every agreement.
    let alone = node.size() == 1;
    let implementation_maps =
        world_ranks.iter().map(|&pe| pe as usize).find(|&pe| pe != me).is_some_and(|peer| {
            // SAFETY: `first_block` is a live symmetric block and `peer` a PE of the job.
            !unsafe { shmem_sys::shmem_ptr(first_block as *const c_void, peer as i32) }.is_null()
        });
    let (none_mapped_by_implementation, _) = agree(world, !implementation_maps);
    if !none_mapped_by_implementation {
        return Ok(Outcome::Implementation);
    }
    let willing = match setting {
        NodeHeapSetting::Off => Err(format!("{}=0", crate::env::NODE_HEAP)),
        _ if alone => Ok(()),
        NodeHeapSetting::Auto => transport_allows(),
        NodeHeapSetting::On => Ok(()),
    };
    let (all_willing, first_refusing) = agree(world, willing.is_ok());
    if !all_willing {
        let why = match willing {
            Err(why) => format!("PE {me}: {why}"),
            Ok(()) => format!("PE {first_refusing} does not allow it (its own report says why)"),
        };
        return refuse(setting, why);
    }

    // 2. Every PE moves its heap onto a memory file; no PE passes the agreement before every
    // heap has moved, so nothing is written into a heap while it moves.
    let moved = heap_bounds(first_block).and_then(|(base, len)| {
        let file = if alone { None } else { Some(move_onto_memfd(base, len)?) };
        Ok((base, len, file))
    });
    let (all_moved, first_failed) = agree(world, moved.is_ok());
    let (base, len, file) = match moved {
        Ok(moved) if all_moved => moved,
        Ok(_) => {
            return refuse(
                setting,
                format!("PE {first_failed} could not move its heap (its own report says why)"),
            );
        }
        Err(why) => return refuse(setting, format!("PE {me}: {why}")),
    };

    // 3. The PEs of each node map each other's files.
    // The file is named by process and descriptor, and checked by device and inode: PEs in
    // separate PID namespaces may share a node's memory, and there a process id may name
    // another process, even this one.
    let fd = file.as_ref().map_or(u64::MAX, |file| file.as_raw_fd() as u64);
    // (u64::MAX, u64::MAX): no file (a PE alone on its node), or fstat failed.
    let identity = file
        .as_ref()
        .and_then(|file| file.metadata().ok())
        .map_or((u64::MAX, u64::MAX), |meta| (meta.dev(), meta.ino()));
    let published = [u64::from(std::process::id()), fd, base as u64, len as u64, identity.0, identity.1];
    let mut table = vec![0u64; PUBLISHED * node.size() as usize];
    node.all_gather_into(&published[..], &mut table[..]);
    let mut starts: Box<[Option<usize>]> = vec![None; world.size() as usize].into_boxed_slice();
    let mut mapped = Ok(());
    for (entry, &pe) in table.chunks_exact(PUBLISHED).zip(&world_ranks) {
        let pe = pe as usize;
        if pe == me {
            starts[pe] = Some(base);
            continue;
        }
        let (pid, fd, _, peer_len) = (entry[0], entry[1], entry[2], entry[3] as usize);
        if peer_len != len {
            mapped = Err(format!("PE {pe}'s heap is {peer_len} bytes, this PE's {len}: the heaps differ"));
            break;
        }
        let peer_identity = (entry[4], entry[5]);
        if peer_identity.0 == u64::MAX {
            mapped = Err(format!("PE {pe} could not read its heap file's identity (fstat failed there)"));
            break;
        }
        if peer_identity == identity {
            mapped = Err(format!("PE {pe} published this PE's own heap file: the PEs' files are confused"));
            break;
        }
        match map_peer(pid, fd, len, peer_identity) {
            Ok(start) => starts[pe] = Some(start),
            Err(why) => {
                mapped = Err(format!("mapping PE {pe}'s heap: {why}"));
                break;
            }
        }
    }
    let heap = NodeHeap { base, len, starts };
    // The peers opened this file by now or failed; the mappings keep it alive.
    let (all_mapped, first_failed) = agree(world, mapped.is_ok());
    drop(file);
    match mapped {
        Ok(()) if all_mapped => Ok(Outcome::Mapped(heap)),
        Ok(()) => refuse(
            setting,
            format!("PE {first_failed} could not map its node's heaps (its own report says why)"),
        ),
        Err(why) => refuse(setting, format!("PE {me}: {why}")),
    }
}

fn refuse(setting: NodeHeapSetting, why: String) -> Result<Outcome, String> {
    if setting == NodeHeapSetting::On { Err(why) } else { Ok(Outcome::NotMapped(why)) }
}

/// Words each PE publishes to its node: process id, descriptor, heap base, heap length, and
/// the file's device and inode.
const PUBLISHED: usize = 6;

/// Whether `ok` holds on every PE, and if not the lowest PE where it does not.
///
/// # Collective
/// An MPI reduction over `world`: returns on no PE before every PE has called it.
fn agree(world: &SimpleCommunicator, ok: bool) -> (bool, usize) {
    let mine: i64 = if ok { i64::MAX } else { i64::from(world.rank()) };
    let mut lowest = 0i64;
    world.all_reduce_into(&mine, &mut lowest, SystemOperation::min());
    (lowest == i64::MAX, lowest.max(0) as usize)
}

/// Whether the transport lets the heap's pages be replaced: a software libfabric provider is
/// named (`SHMEM_OFI_PROVIDER`, else `FI_PROVIDER`), or none is named and the process holds no
/// RDMA device open.
pub(crate) fn transport_allows() -> Result<(), String> {
    let named = ["SHMEM_OFI_PROVIDER", "FI_PROVIDER"]
        .iter()
        .find_map(|variable| std::env::var(variable).ok().map(|value| (*variable, value)));
    if let Some((variable, value)) = named {
        provider_is_software(&value).map_err(|why| format!("{variable}={value:?}: {why}"))?;
    }
    match open_rdma_device() {
        Some(device) => {
            Err(format!("the process holds {device} open, a NIC that may have registered the heap's pages"))
        }
        None => Ok(()),
    }
}

/// Whether every provider in a libfabric provider list (`tcp;ofi_rxm`, `sockets`) copies with
/// the CPU.
pub(crate) fn provider_is_software(list: &str) -> Result<(), String> {
    let names: Vec<&str> = list.split([';', ',']).map(str::trim).filter(|n| !n.is_empty()).collect();
    if names.is_empty() {
        return Err("names no provider".to_string());
    }
    match names.iter().find(|name| !SOFTWARE_PROVIDERS.contains(name)) {
        Some(name) => Err(format!(
            "provider '{name}' may register the heap's pages with a NIC (the heap is shared only \
             over {})",
            SOFTWARE_PROVIDERS.join(", ")
        )),
        None => Ok(()),
    }
}

/// An RDMA device among this process's open files, if any.
fn open_rdma_device() -> Option<String> {
    let entries = std::fs::read_dir("/proc/self/fd").ok()?;
    entries.filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok()).find_map(|target| {
        let target = target.to_string_lossy().into_owned();
        RDMA_DEVICES.iter().any(|device| target.starts_with(device)).then_some(target)
    })
}

/// The mapping of this process that contains `address`, of any kind, from `/proc/self/maps`.
pub(crate) fn mapping_around(address: usize) -> Result<(usize, usize), String> {
    let maps =
        std::fs::read_to_string("/proc/self/maps").map_err(|e| format!("reading /proc/self/maps: {e}"))?;
    maps.lines()
        .filter_map(parse_maps_line)
        .find(|(start, end, ..)| (start..end).contains(&&address))
        .map(|(start, end, ..)| (start, end))
        .ok_or_else(|| format!("no mapping in /proc/self/maps holds the heap address {address:#x}"))
}

/// The anonymous private mapping of this process that contains `address`, from
/// `/proc/self/maps`.
pub(crate) fn anonymous_mapping_around(address: usize) -> Result<(usize, usize), String> {
    let maps =
        std::fs::read_to_string("/proc/self/maps").map_err(|e| format!("reading /proc/self/maps: {e}"))?;
    let line = maps
        .lines()
        .find(|line| parse_maps_line(line).is_some_and(|(start, end, ..)| (start..end).contains(&address)))
        .ok_or_else(|| format!("no mapping in /proc/self/maps holds the heap address {address:#x}"))?;
    let (start, end, perms, anonymous) = parse_maps_line(line).expect("parsed above");
    if perms != "rw-p" || !anonymous {
        return Err(format!("the heap is not an anonymous private read-write mapping: {line}"));
    }
    Ok((start, end))
}

/// `start`, `end`, permissions and whether it is anonymous (no inode, no path), from a line
/// of `/proc/PID/maps`.
fn parse_maps_line(line: &str) -> Option<(usize, usize, &str, bool)> {
    let mut fields = line.split_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let perms = fields.next()?;
    let (_offset, _device, inode) = (fields.next()?, fields.next()?, fields.next()?);
    let path = fields.next();
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    Some((start, end, perms, inode == "0" && path.is_none()))
}

/// The smallest `a` in `lo..=hi` with `inside(a)`, where `inside(hi)` holds and `inside` is
/// false below some point and true from it on.
pub(crate) fn lowest(mut lo: usize, mut hi: usize, inside: impl Fn(usize) -> bool) -> usize {
    if inside(lo) {
        return lo;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if inside(mid) { hi = mid } else { lo = mid }
    }
    hi
}

/// The largest `a` in `lo..=hi` with `inside(a)`, where `inside(lo)` holds and `inside` is
/// true up to some point and false beyond it.
pub(crate) fn highest(mut lo: usize, mut hi: usize, inside: impl Fn(usize) -> bool) -> usize {
    if inside(hi) {
        return hi;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if inside(mid) { lo = mid } else { hi = mid }
    }
    lo
}

pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 { size as usize } else { 4096 }
}

/// Moves `len` bytes of anonymous memory at `base` (page-aligned, a multiple of the page
/// size) onto a new memory file, in place: the pages in use are copied into the file, then
/// the file is mapped over them. Returns the file, which other processes may open and map.
///
/// Nothing may write the range while it moves: a write between the copy and the mapping
/// would be lost. The caller makes sure no other PE can (nothing in flight, the others
/// waiting in an agreement), and calls it before this PE starts threads that touch the heap.
pub(crate) fn move_onto_memfd(base: usize, len: usize) -> Result<File, String> {
    let page = page_size();
    if !base.is_multiple_of(page) || !len.is_multiple_of(page) || len == 0 {
        return Err(format!("the heap {base:#x}+{len:#x} is not whole pages"));
    }
    // SAFETY: the name is a NUL-terminated literal; the flags are valid.
    let fd = unsafe {
        libc::memfd_create(c"onesided-symmetric-heap".as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING)
    };
    if fd < 0 {
        return Err(format!("memfd_create: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: fd is a new descriptor that nothing else owns.
    let file = unsafe { File::from_raw_fd(fd) };
    file.set_len(len as u64).map_err(|e| format!("sizing the heap's memory file to {len} bytes: {e}"))?;
    // Its size is fixed from here on: a peer that could shrink it would make every PE that
    // maps it fault on the pages cut off.
    // SAFETY: fcntl on a descriptor this function owns, with a valid command and seal set.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_SHRINK | libc::F_SEAL_GROW) }
        < 0
    {
        return Err(format!("sealing the heap's memory file: {}", std::io::Error::last_os_error()));
    }
    let staging = map_shared(&file, len, None)?;
    let unmap_staging = || {
        // SAFETY: `staging` is the mapping made above, `len` bytes, no longer used.
        unsafe { libc::munmap(staging as *mut c_void, len) };
    };
    if let Err(why) = copy_pages_in_use(base, staging, len, page) {
        unmap_staging();
        return Err(why);
    }
    if let Err(why) = map_shared(&file, len, Some(base)) {
        // A failed MAP_FIXED may already have unmapped the heap (kernels before 6.12 unmap
        // first): put anonymous memory back and the content with it, from the file.
        restore_heap(base, staging, len, page, &why);
        unmap_staging();
        return Err(why);
    }
    unmap_staging();
    Ok(file)
}

/// Puts private anonymous memory back at `base` after a failed move and copies the heap's
/// content back into it from `staging`. Without its heap this process cannot go on, nor
/// end through the library (which would touch the heap): if this fails, it exits at once,
/// and the launcher ends the job.
fn restore_heap(base: usize, staging: usize, len: usize, page: usize, failure: &str) {
    // SAFETY: `base..base + len` is this PE's heap range, which the failed mapping may have
    // left unmapped; nothing else of this process lies there.
    let restored = unsafe {
        libc::mmap(
            base as *mut c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
            -1,
            0,
        )
    };
    let copied = if restored == libc::MAP_FAILED {
        Err(format!("mmap: {}", std::io::Error::last_os_error()))
    } else {
        copy_pages_in_use(staging, base, len, page)
    };
    if let Err(why) = copied {
        crate::launch::say(&format!(
            "onesided: moving the symmetric heap at {base:#x} onto a memory file failed ({failure}), \
             and putting it back failed too ({why}); this PE cannot continue. Set {}=0 to keep \
             the heap where the library put it",
            crate::env::NODE_HEAP
        ));
        // SAFETY: ends the process without running exit handlers, which could touch the heap.
        unsafe { libc::_exit(1) };
    }
}

/// Maps `file` shared, read-write, at `at` (replacing what is there) or wherever the kernel
/// chooses.
fn map_shared(file: &File, len: usize, at: Option<usize>) -> Result<usize, String> {
    let (hint, flags) = match at {
        Some(at) => (at as *mut c_void, libc::MAP_SHARED | libc::MAP_FIXED),
        None => (std::ptr::null_mut(), libc::MAP_SHARED),
    };
    // SAFETY: mapping a file we own; with MAP_FIXED the caller has made sure the range is its
    // own anonymous heap, whose content was copied into the file.
    let mapped =
        unsafe { libc::mmap(hint, len, libc::PROT_READ | libc::PROT_WRITE, flags, file.as_raw_fd(), 0) };
    if mapped == libc::MAP_FAILED {
        return Err(format!(
            "mmap of the heap's memory file ({len} bytes): {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(mapped as usize)
}

/// Copies every page of `base..base + len` that is present or swapped out (from
/// `/proc/self/pagemap`) to the same offset from `to`. Pages never touched read as zero in
/// both places and are skipped, so a large, mostly unused heap costs nothing to move.
fn copy_pages_in_use(base: usize, to: usize, len: usize, page: usize) -> Result<(), String> {
    const PRESENT: u64 = 1 << 63;
    const SWAPPED: u64 = 1 << 62;
    const BATCH: usize = 4096;
    let pagemap = File::open("/proc/self/pagemap").map_err(|e| format!("opening /proc/self/pagemap: {e}"))?;
    let pages = len / page;
    let mut entries = vec![0u8; BATCH * 8];
    let mut first = 0;
    while first < pages {
        let count = BATCH.min(pages - first);
        let bytes = &mut entries[..count * 8];
        pagemap
            .read_exact_at(bytes, ((base / page + first) * 8) as u64)
            .map_err(|e| format!("reading /proc/self/pagemap: {e}"))?;
        let mut run: Option<usize> = None;
        for i in 0..=count {
            let in_use = i < count && {
                let entry = u64::from_ne_bytes(bytes[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
                entry & (PRESENT | SWAPPED) != 0
            };
            match (in_use, run) {
                (true, None) => run = Some(i),
                (false, Some(start)) => {
                    let offset = (first + start) * page;
                    // SAFETY: both ranges lie inside their `len`-byte mappings; they do not
                    // overlap (distinct mappings).
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            (base + offset) as *const u8,
                            (to + offset) as *mut u8,
                            (i - start) * page,
                        )
                    };
                    run = None;
                }
                _ => {}
            }
        }
        first += count;
    }
    Ok(())
}

/// Maps the `len`-byte memory file that process `pid` holds as descriptor `fd`, after
/// checking that it is the file with `identity` (device, inode) that the peer published.
fn map_peer(pid: u64, fd: u64, len: usize, identity: (u64, u64)) -> Result<usize, String> {
    let path = format!("/proc/{pid}/fd/{fd}");
    let file = std::fs::OpenOptions::new().read(true).write(true).open(&path).map_err(|e| {
        format!(
            "opening {path}: {e} (the PEs of a node must run as one user, in one PID namespace, \
             and may open each other's descriptors: ptrace scope, dumpable; or set {}=0)",
            crate::env::NODE_HEAP
        )
    })?;
    let meta = file.metadata().map_err(|e| format!("{path}: {e}"))?;
    if (meta.dev(), meta.ino()) != identity {
        return Err(format!(
            "{path} is not the peer's heap file (another process has that id here: are the PEs in \
             separate PID namespaces? set {}=0)",
            crate::env::NODE_HEAP
        ));
    }
    if meta.len() != len as u64 {
        return Err(format!("{path} is {} bytes, expected {len}", meta.len()));
    }
    map_shared(&file, len, None)
}

#[cfg(test)]
mod tests;
