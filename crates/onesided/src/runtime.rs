//! The runtime handle: MPI and OpenSHMEM initialised together, finalised in the right order.

use std::ffi::c_int;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
use std::time::Duration;

use mpi::environment::{Threading, Universe};
use mpi::topology::SimpleCommunicator;

use crate::constants::Constants;
use crate::env;
use crate::error::{Error, Result};
use crate::layout::{HeapLayout, SameNodeAccess};
use crate::mpi_window::HeapWindow;
use crate::scratch::CollectiveScratch;
use crate::startup;
use crate::watchdog::{self, watch};

/// Set by the first [`Runtime::init`] or [`Runtime::attach`] and never cleared: MPI and
/// OpenSHMEM cannot be initialised twice.
static INITIALISED: AtomicBool = AtomicBool::new(false);

/// The OpenSHMEM implementation the crate was built against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Implementation {
    /// Open MPI's OSHMEM.
    Oshmem,
    /// Sandia OpenSHMEM.
    Sos,
}

impl Implementation {
    /// The OpenSHMEM specification version `(major, minor)` of the header built against.
    pub fn spec_version(self) -> (u32, u32) {
        shmem_sys::SPEC_VERSION
    }
}

/// The process's handle on MPI and OpenSHMEM. Exactly one exists per process.
///
/// [`init`](Self::init) initialises MPI (with `MPI_THREAD_MULTIPLE`) and then OpenSHMEM (with
/// `SHMEM_THREAD_MULTIPLE`), and on drop finalises OpenSHMEM and then MPI where the
/// implementation has not already done so (Open MPI's `shmem_finalize` also finalises MPI;
/// Sandia OpenSHMEM leaves MPI to the program). [`attach`](Self::attach) joins a program
/// that initialised MPI itself and leaves MPI's end to it.
///
/// Every symmetric object borrows the runtime, so none can outlive it.
///
/// # Threads
/// `Runtime` is `Sync`: worker threads of a PE (rayon, scoped threads) may share `&Runtime`
/// and issue puts, gets, atomics and waits concurrently, since both libraries were asked for
/// full thread support and `init` fails if they do not provide it. It is not `Send`: MPI must
/// be finalised by the thread that initialised it. Collective operations must be called by
/// one thread of each PE at a time, in the same order on every PE.
///
/// # Panics and errors
/// If a PE unwinds from a panic while holding the runtime, dropping it ends the whole job
/// with status 1 ([`abort`](Runtime::abort)) instead of leaving the other PEs waiting.
///
/// An error that every PE sees ([`ErrorScope::EveryPe`](crate::ErrorScope::EveryPe): bad
/// input, an error every PE returns from a collective) should end the job normally: drop the
/// runtime on every PE, then exit with a failure status. Only an error that leaves other PEs
/// waiting for this one ([`ErrorScope::ThisPe`](crate::ErrorScope::ThisPe)) calls for
/// [`abort`](Runtime::abort). [`Error::scope`](crate::Error::scope) tells them apart.
pub struct Runtime {
    /// MPI's handle when the runtime initialised MPI; `None` when attached to a host's.
    universe: ManuallyDrop<Option<Universe>>,
    my_pe: usize,
    n_pes: usize,
    constants: Constants,
    wait_timeout: Duration,
    direct: bool,
    /// More PEs on this node than it has cores online (or the setting says so): waits nap
    /// between polls.
    oversubscribed: bool,
    /// The symmetric heap's base and mapping. When every PE's heap is mapped into this
    /// process and direct access is on, every signal is written with release stores, so an
    /// acquire load alone completes a wait.
    heap: HeapLayout,
    allocations: AtomicU64,
    collectives: Mutex<CollectiveScratch>,
    /// The paths of `Auto` exchanges, once settled ([`crate::links`]).
    pub(crate) links: Mutex<Option<crate::links::Links>>,
    /// The MPI window over the symmetric heap, once an exchange on the MPI one-sided path
    /// has needed it ([`Runtime::collective_heap_window`]).
    window: std::sync::OnceLock<HeapWindow>,
    /// Joined to a host's MPI ([`Runtime::attach`]): MPI's end is the host's.
    attached: bool,
    /// MPI must be finalised on the initialising thread.
    _not_send: PhantomData<*const ()>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("my_pe", &self.my_pe)
            .field("n_pes", &self.n_pes)
            .field("implementation", &self.implementation())
            .field("wait_timeout", &self.wait_timeout)
            .field("direct", &self.direct)
            .field("oversubscribed", &self.oversubscribed)
            .finish_non_exhaustive()
    }
}

// SAFETY: every OpenSHMEM and MPI routine the runtime calls is thread-safe because `init`
// obtained THREAD_MULTIPLE from both libraries (it fails otherwise); the mutable state is a
// Mutex (collective scratch) and atomics. `Runtime` stays !Send through `_not_send`.
unsafe impl Sync for Runtime {}

impl Runtime {
    /// Initialises MPI, then OpenSHMEM, both with full thread support.
    ///
    /// # Collective
    /// Every PE of the job must call it.
    ///
    /// # Errors
    /// - [`Error::AlreadyInitialized`] on a second call in the process;
    /// - [`Error::Environment`] when `ONESIDED_WAIT_TIMEOUT`, `ONESIDED_DIRECT`,
    ///   `ONESIDED_OVERSUBSCRIBED` or `ONESIDED_NODE_HEAP` is malformed or, with Open MPI,
    ///   `OMPI_MCA_osc` is not `ucx` (see [`env`](crate::env));
    /// - [`Error::NodeHeap`] on every PE when `ONESIDED_NODE_HEAP=1` and the heaps of a node
    ///   could not be shared;
    /// - [`Error::Launch`] on every process when the launch would start each as a job of one
    ///   PE, or OpenSHMEM's PEs are not the launcher's or MPI's ([`crate::doctor`]);
    /// - [`Error::SettingsDiffer`] on every PE when the PEs run different OpenSHMEM or MPI
    ///   libraries, or disagree on the heap size, the library's settings or the transport;
    /// - [`Error::AddressRandomisation`] on every PE when one runs with address-space
    ///   randomisation where Sandia OpenSHMEM's cross-memory attach needs it off;
    /// - [`Error::MpiAlreadyInitialized`], [`Error::ThreadSupport`], [`Error::InitFailed`].
    pub fn init() -> Result<Runtime> {
        let settings = Settings::read()?;
        // Before the runtime counts as started: a program that started MPI may still attach.
        if mpi::environment::is_initialized() && !INITIALISED.load(Ordering::SeqCst) {
            return Err(Error::MpiAlreadyInitialized);
        }
        if INITIALISED.swap(true, Ordering::SeqCst) {
            return Err(Error::AlreadyInitialized);
        }
        let (universe, threading) =
            mpi::initialize_with_threading(Threading::Multiple).ok_or(Error::MpiAlreadyInitialized)?;
        if threading != Threading::Multiple {
            drop(universe);
            return Err(Error::ThreadSupport { library: "MPI", provided: format!("{threading:?}") });
        }
        Self::start(Some(universe), settings)
    }

    /// Joins a program that has initialised MPI itself (with `MPI_THREAD_MULTIPLE`), as an
    /// MD code does before anything else: starts OpenSHMEM on the program's MPI world
    /// (OpenSHMEM's PEs are its ranks), and leaves MPI to the program, which finalises it
    /// after dropping the runtime. Under Open MPI, whose `shmem_finalize` would also end MPI,
    /// OpenSHMEM ends inside the program's `MPI_Finalize` instead (see the `host` module), so
    /// the program may go on using MPI after the runtime is gone and finalises MPI as it
    /// always does.
    ///
    /// # Collective
    /// Every rank of the program's MPI world must call it.
    ///
    /// # Errors
    /// As [`init`](Self::init), and [`Error::MpiNotInitialized`] when MPI is not initialised
    /// (or already finalised), [`Error::HostThreadLevel`] when the program asked MPI for less
    /// than `MPI_THREAD_MULTIPLE`.
    pub fn attach() -> Result<Runtime> {
        let settings = Settings::read()?;
        if INITIALISED.load(Ordering::SeqCst) {
            return Err(Error::AlreadyInitialized);
        }
        crate::host::check_host_mpi()?;
        crate::host::arrange_end()?;
        if INITIALISED.swap(true, Ordering::SeqCst) {
            return Err(Error::AlreadyInitialized);
        }
        Self::start(None, settings)
    }

    /// OpenSHMEM and the runtime's state on an initialised MPI: `universe` when the runtime
    /// initialised MPI (and finalises it), `None` when a host did.
    fn start(universe: Option<Universe>, settings: Settings) -> Result<Runtime> {
        let Settings { wait_timeout, direct, oversubscribed_setting, node_heap_setting } = settings;
        let var = |name: &str| std::env::var(name).ok();
        let attached = universe.is_none();
        // Where a start-up check fails after OpenSHMEM started: its end, and MPI's when ours.
        let give_up = |universe: Option<Universe>| {
            crate::host::end_shmem(attached);
            finish_mpi(universe);
            watchdog::stop();
        };
        {
            use mpi::topology::Communicator;
            // From here on every call that can block on a peer has a deadline; the PE number
            // is the world rank (OpenSHMEM's PEs are MPI's ranks under both implementations).
            watchdog::start(SimpleCommunicator::world().rank() as usize, wait_timeout);
        }
        // Before OpenSHMEM starts, whose first barrier already goes through CMA where it is
        // used: address randomisation there would abort every PE.
        let node_pes = {
            use mpi::topology::Communicator;
            let world = SimpleCommunicator::world();
            let node_pes = watch("MPI_Comm_split_type", None, || world.split_shared(0).size()) as usize;
            let breaks = node_pes > 1 && startup::address_randomised() && startup::library_uses_cma();
            let check = || startup::collective_check_randomisation(&world, breaks);
            if let Err(e) = watch("MPI_Allreduce (the start-up checks)", None, check) {
                finish_mpi(universe);
                watchdog::stop();
                return Err(e);
            }
            node_pes
        };
        let mut provided: c_int = 0;
        // SAFETY: MPI is initialised and OpenSHMEM is not (guarded by INITIALISED); `provided`
        // is a valid out-pointer.
        let code = watch("shmem_init_thread", None, || unsafe {
            shmem_sys::shmem_init_thread(shmem_sys::shmem_sys_thread_multiple, &mut provided)
        });
        if code != 0 {
            finish_mpi(universe);
            watchdog::stop();
            return Err(Error::InitFailed { code });
        }
        if attached {
            crate::host::started();
        }
        // SAFETY: reading a shim constant.
        if provided < unsafe { shmem_sys::shmem_sys_thread_multiple } {
            give_up(universe);
            return Err(Error::ThreadSupport {
                library: "OpenSHMEM",
                provided: shmem_thread_level_name(provided),
            });
        }
        // SAFETY: OpenSHMEM is initialised.
        let (my_pe, n_pes) = unsafe { (shmem_sys::shmem_my_pe(), shmem_sys::shmem_n_pes()) };
        // Before the first symmetric allocation, which would hang or crash on a wrong launch or
        // mixed settings: the doctor's checks, over MPI only, ending every PE with the same
        // error.
        let checked = {
            use mpi::topology::Communicator;
            let world = SimpleCommunicator::world();
            let pes = (my_pe as usize, n_pes as usize);
            let check = || {
                // Every PE learns whether any found the launch wrong before any branches: a PE
                // that went on to finalise alone would leave the others waiting.
                let launch = startup::check_launch(&var, pes, (world.rank() as usize, world.size() as usize));
                startup::collective_agree(&world, launch).and_then(|()| {
                    startup::collective_check_settings(
                        &world,
                        &startup::implementation_name(),
                        &startup::mpi_library_name(),
                    )
                })
            };
            watch("MPI collectives (the start-up checks)", None, check)
        };
        match checked {
            Ok(()) => {}
            Err(e) => {
                give_up(universe);
                return Err(e);
            }
        };
        let oversubscribed = oversubscribed_setting.unwrap_or_else(|| node_is_oversubscribed(node_pes));
        let constants = Constants::read();
        let collectives = match CollectiveScratch::collective_alloc(&constants) {
            Ok(scratch) => scratch,
            Err(e) => {
                give_up(universe);
                return Err(e);
            }
        };
        let layout = || {
            HeapLayout::collective_new(
                &SimpleCommunicator::world(),
                collectives.block_address(),
                direct,
                node_heap_setting,
            )
        };
        let heap = match watch("MPI and OpenSHMEM collectives (the heap layout)", None, layout) {
            Ok(heap) => heap,
            Err(e) => {
                let mut collectives = collectives;
                collectives.free();
                give_up(universe);
                return Err(e);
            }
        };
        Ok(Runtime {
            universe: ManuallyDrop::new(universe),
            attached,
            my_pe: my_pe as usize,
            n_pes: n_pes as usize,
            constants,
            wait_timeout,
            direct,
            oversubscribed,
            heap,
            allocations: AtomicU64::new(0),
            collectives: Mutex::new(collectives),
            links: Mutex::new(None),
            window: std::sync::OnceLock::new(),
            _not_send: PhantomData,
        })
    }

    /// This PE's number, `0..n_pes()`.
    pub fn my_pe(&self) -> usize {
        self.my_pe
    }

    /// The number of PEs in the job.
    pub fn n_pes(&self) -> usize {
        self.n_pes
    }

    /// The implementation the crate was built against.
    pub fn implementation(&self) -> Implementation {
        if cfg!(shmem_sos) { Implementation::Sos } else { Implementation::Oshmem }
    }

    /// How long a wait may take before it returns [`Error::WaitTimeout`]
    /// (`ONESIDED_WAIT_TIMEOUT`, default 60 s).
    pub fn wait_timeout(&self) -> Duration {
        self.wait_timeout
    }

    /// Whether transfers to PEs whose memory is mapped into this process (same node,
    /// shared-memory transport) are plain copies through the mapping rather than library
    /// calls (`ONESIDED_DIRECT`, default on).
    pub fn direct_enabled(&self) -> bool {
        self.direct
    }

    /// How this PE reaches the symmetric memory of the other PEs on its node: through the
    /// implementation's mapping, through the heaps this library shares between them (Sandia
    /// OpenSHMEM without XPMEM, [`env::NODE_HEAP`](crate::env::NODE_HEAP)), or by library
    /// calls only, with the reason. Benchmarks and examples print it: it decides whether the
    /// one-sided paths are copies or system calls on a node.
    pub fn same_node_access(&self) -> &SameNodeAccess {
        self.heap.same_node_access()
    }

    /// The PEs running on this PE's node (MPI's shared-memory split of the world), this one
    /// included, in increasing order: as many as the node runs, whatever the job's size.
    pub fn node_pes(&self) -> &[usize] {
        self.heap.node_pes()
    }

    /// Whether `pe` runs on this PE's node: the link class an exchange with it uses
    /// ([`Links`](crate::Links)).
    pub fn same_node(&self, pe: usize) -> bool {
        self.heap.node_pes().binary_search(&pe).is_ok()
    }

    /// MPI's world communicator, for the two-sided reference paths. Its ranks equal the PE
    /// numbers.
    pub fn world(&self) -> SimpleCommunicator {
        SimpleCommunicator::world()
    }

    /// Waits until every PE has called `barrier`, after completing this PE's outstanding
    /// puts (`shmem_barrier_all`).
    ///
    /// # Collective
    /// Every PE must call it.
    pub fn barrier(&self) {
        // SAFETY: OpenSHMEM is initialised for the lifetime of `self`.
        watch("shmem_barrier_all", None, || unsafe { shmem_sys::shmem_barrier_all() })
    }

    /// Orders this PE's puts and atomics to each target: those issued before the fence are
    /// delivered before those issued after it (`shmem_fence`, and a memory fence for copies
    /// through the shared-memory mapping, made by any thread of this PE).
    pub fn fence(&self) {
        fence(Ordering::SeqCst);
        // SAFETY: OpenSHMEM is initialised for the lifetime of `self`.
        watch("shmem_fence", None, || unsafe { shmem_sys::shmem_fence() })
    }

    /// Completes every put, non-blocking get and atomic this PE has issued (`shmem_quiet`,
    /// and a memory fence for copies through the shared-memory mapping).
    pub fn quiet(&self) {
        fence(Ordering::SeqCst);
        // SAFETY: OpenSHMEM is initialised for the lifetime of `self`.
        watch("shmem_quiet", None, || unsafe { shmem_sys::shmem_quiet() })
    }

    /// Ends the whole job at once with exit status `code`: for errors only this PE knows
    /// about, when the other PEs would otherwise wait for it. Standard output and error are
    /// flushed first, so a message printed before the call is not lost.
    ///
    /// With Open MPI's OSHMEM this is `shmem_global_exit`. Sandia OpenSHMEM's
    /// `shmem_global_exit` raises `SIGABRT` after asking the launcher to end the job (a core
    /// dump and a backtrace); there the job ends through `MPI_Abort` on the world
    /// communicator instead, whose ranks are the PEs, with the same status and no signal.
    ///
    /// For an error that every PE sees, end normally instead: drop the runtime on every PE
    /// and exit with a failure status.
    pub fn abort(&self, code: i32) -> ! {
        crate::launch::end_job(code)
    }

    /// The MPI window over this PE's symmetric heap, created at the first call.
    ///
    /// # Collective
    /// Every PE calls it at the same point the first time (creating an exchange on the MPI
    /// one-sided path does); later calls return the window at once.
    pub(crate) fn collective_heap_window(&self) -> Result<&HeapWindow> {
        if let Some(window) = self.window.get() {
            return Ok(window);
        }
        let first_block = self.heap.base();
        let bounds = crate::layout::heap_bounds(first_block);
        let window = HeapWindow::collective_new(&self.world(), bounds, first_block)?;
        Ok(self.window.get_or_init(|| window))
    }

    /// Lets OpenSHMEM and MPI move what is in flight, without waiting: a force kernel calls
    /// it between chunks of its pairs while a started call ([`Call::start`](crate::Call::start))
    /// or a split halo step is in flight. On a node the one-sided paths need none (a put lands
    /// through the mapping); across nodes, UCX over TCP and Open MPI's TCP transport move a
    /// message only while its PEs call into the library, so without it the data of a started
    /// call waits for the finish. One call costs about a microsecond.
    pub fn progress(&self) {
        // SAFETY: takes no arguments; the library was initialised with SHMEM_THREAD_MULTIPLE.
        unsafe { shmem_sys::shmem_sys_progress() };
        self.progress_window();
        use mpi::point_to_point::Source;
        use mpi::topology::Communicator;
        // A probe that matches nothing drives MPI's progress (MPI runs while the runtime does).
        let _ = self.world().any_process().immediate_probe();
    }

    /// Drives MPI's progress on the heap window, if an exchange has made one: a PE waiting in
    /// the library lands what other PEs write through the window, and acknowledges their
    /// puts, which they may be waiting for (UCX over TCP emulates remote writes with
    /// messages the target must progress).
    pub(crate) fn progress_window(&self) {
        if let Some(window) = self.window.get() {
            window.progress();
        }
    }

    /// The collective scratch, locked: collectives of one PE's threads never interleave.
    pub(crate) fn lock_collectives(&self) -> std::sync::MutexGuard<'_, CollectiveScratch> {
        self.collectives.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn constants(&self) -> &Constants {
        &self.constants
    }

    /// The sequence number of the next symmetric allocation, for diagnostics.
    pub(crate) fn next_allocation_index(&self) -> u64 {
        self.allocations.fetch_add(1, Ordering::Relaxed)
    }

    /// Whether PEs share cores: the node runs more PEs than it has cores online, or
    /// `ONESIDED_OVERSUBSCRIBED=1` says so (see [`env`](crate::env)). Waits then sleep
    /// between polls once they have spun and yielded a while, so that the PE they wait for
    /// gets the core even where it waits on another core's run queue.
    pub fn oversubscribed(&self) -> bool {
        self.oversubscribed
    }

    /// Whether an acquire load of a signal word is enough to complete a wait (see `heap`).
    pub(crate) fn all_pes_mapped(&self) -> bool {
        self.heap.all_mapped()
    }

    /// The symmetric heap as this process sees it.
    pub(crate) fn heap(&self) -> &HeapLayout {
        &self.heap
    }

    /// Checks a PE number; `what` names the operation and its object for the error.
    pub(crate) fn check_pe(&self, pe: usize, what: impl FnOnce() -> String) -> Result<()> {
        if pe < self.n_pes { Ok(()) } else { Err(Error::InvalidPe { what: what(), pe, n_pes: self.n_pes }) }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // The other PEs would wait for this one forever; end the job instead.
            crate::launch::end_job(1);
        }
        // Before finalising: freeing the window is an MPI collective.
        drop(self.window.take());
        self.collectives.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner()).free();
        // Every symmetric object borrowed `self` and is gone.
        let attached = self.attached;
        watch("shmem_finalize", None, || crate::host::end_shmem(attached));
        // SAFETY: the universe is taken exactly once, here.
        let universe = unsafe { ManuallyDrop::take(&mut self.universe) };
        watch("MPI_Finalize", None, || finish_mpi(universe));
        watchdog::stop();
    }
}

/// Whether the `node_pes` PEs on this node (MPI's shared-memory split of the world)
/// outnumber its cores.
///
/// The cores are those the kernel has online, not this process's affinity: a PE bound to one
/// core sees one, though its neighbours have cores of their own.
fn node_is_oversubscribed(node_pes: usize) -> bool {
    let cores = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|list| count_cpu_list(list.trim()))
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    node_pes > cores
}

/// The number of CPUs in a kernel CPU list such as `0-3,8,10-11`; `None` if malformed.
fn count_cpu_list(list: &str) -> Option<usize> {
    list.split(',').try_fold(0, |count, range| {
        let (first, last) = range.split_once('-').unwrap_or((range, range));
        let (first, last): (usize, usize) = (first.parse().ok()?, last.parse().ok()?);
        (last >= first).then(|| count + last - first + 1)
    })
}

/// The name of an OpenSHMEM thread level, for messages.
fn shmem_thread_level_name(level: c_int) -> String {
    // SAFETY: reading shim constants.
    let names = unsafe {
        [
            (shmem_sys::shmem_sys_thread_single, "SINGLE"),
            (shmem_sys::shmem_sys_thread_funneled, "FUNNELED"),
            (shmem_sys::shmem_sys_thread_serialized, "SERIALIZED"),
            (shmem_sys::shmem_sys_thread_multiple, "MULTIPLE"),
        ]
    };
    names
        .iter()
        .find(|(value, _)| *value == level)
        .map_or_else(|| format!("{level} (unknown)"), |(_, name)| name.to_string())
}

/// Finalises MPI when the runtime initialised it (`universe`), unless OpenSHMEM already did
/// (Open MPI's `shmem_finalize` does; rsmpi's `Universe` would then call `MPI_Finalize` a
/// second time, which is an error). An attached runtime's MPI is the host's.
fn finish_mpi(universe: Option<Universe>) {
    let Some(universe) = universe else { return };
    if mpi::environment::is_finalized() {
        std::mem::forget(universe);
    } else {
        drop(universe);
    }
}

/// What the runtime reads from the environment before it touches either library, so that a
/// corrected retry is possible.
struct Settings {
    wait_timeout: Duration,
    direct: bool,
    oversubscribed_setting: Option<bool>,
    node_heap_setting: env::NodeHeapSetting,
}

impl Settings {
    fn read() -> Result<Settings> {
        env::check_launch_environment()?;
        let var = |name: &str| std::env::var(name).ok();
        startup::check_process_manager(&var, startup::mpi_may_join_slurm_pmi())?;
        Ok(Settings {
            wait_timeout: env::wait_timeout()?,
            direct: env::direct()?,
            oversubscribed_setting: env::oversubscribed()?,
            node_heap_setting: env::node_heap()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::count_cpu_list;

    #[test]
    fn cpu_lists_are_counted() {
        assert_eq!(count_cpu_list("0"), Some(1));
        assert_eq!(count_cpu_list("0-1"), Some(2));
        assert_eq!(count_cpu_list("0-3,8,10-11"), Some(7));
        assert_eq!(count_cpu_list("3-1"), None);
        assert_eq!(count_cpu_list(""), None);
        assert_eq!(count_cpu_list("0-x"), None);
    }
}
