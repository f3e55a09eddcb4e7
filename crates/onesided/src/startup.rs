//! The start-up checks: the launches that would hang, crash or run wrong, found before the
//! libraries or the first symmetric allocation can fail, and refused on every PE alike with
//! the fix ([`doctor`](crate::doctor) lists them). They run before the runtime exists, over
//! MPI's world, and need nothing of the crate above the launcher and the environment.

use mpi::collective::{CommunicatorCollectives, Root, SystemOperation};
use mpi::topology::{Communicator, SimpleCommunicator};

use crate::agree::{Agreed, Agreement};
use crate::env;
use crate::error::{Error, Result};
use crate::raw::heap_capacity;
/// Variables in which launchers give the job's process count, in the order they are trusted:
/// Open MPI's `mpirun`/`oshrun` (also when it starts Sandia OpenSHMEM programs), Hydra and
/// Slurm's PMI-2, a Slurm job step.
pub const LAUNCH_SIZE_VARIABLES: [&str; 3] = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"];

/// Variables through which a process joins its launcher's job: PMIx (Open MPI's launcher,
/// `srun --mpi=pmix`), PMI-1 and PMI-2 (Hydra, `srun --mpi=pmi2`), Open MPI's own.
pub const PROCESS_MANAGER_VARIABLES: [&str; 4] = ["PMIX_RANK", "PMI_RANK", "PMI_FD", "OMPI_COMM_WORLD_RANK"];

/// The launcher's process count: the first of [`LAUNCH_SIZE_VARIABLES`] that is set to a
/// number, with its name. A Slurm step's count counts only for the process the step started
/// (`SLURM_TASK_PID` is this process, wrappers that `exec` included), not for one started
/// inside it by another launcher or a shell (`srun --pty bash`).
fn launcher_size(var: &dyn Fn(&str) -> Option<String>) -> Option<(&'static str, usize)> {
    let started_by_slurm =
        var("SLURM_TASK_PID").is_some_and(|pid| pid.trim() == std::process::id().to_string());
    LAUNCH_SIZE_VARIABLES
        .iter()
        .filter(|&&name| name != "SLURM_STEP_NUM_TASKS" || started_by_slurm)
        .find_map(|&name| var(name).and_then(|v| v.trim().parse().ok()).map(|n| (name, n)))
}

/// The fix for a process that could not join its job, by launcher.
fn launch_fix(variable: &str) -> &'static str {
    if variable == "SLURM_STEP_NUM_TASKS" {
        "under Slurm, launch with `srun --mpi=pmix` (the PMIx plugin, which Open MPI and Sandia \
         OpenSHMEM here are built for; `srun --mpi=list` lists the plugins, and `MpiDefault=pmix` \
         in slurm.conf makes it the default), or start `mpirun`/`oshrun` inside the allocation"
    } else {
        "launch with the `oshrun` or `mpirun` of the OpenSHMEM and MPI the program was built \
         against (`onesided-doctor` names them), not another installation's"
    }
}

/// Check 1: run before either library starts. `var` reads an environment variable;
/// `mpi_may_join` says whether the MPI library could join the launcher without any of
/// [`PROCESS_MANAGER_VARIABLES`] (Slurm's own PMI library, which reads Slurm's variables): then
/// only check 3 can tell.
pub(crate) fn check_process_manager(var: &dyn Fn(&str) -> Option<String>, mpi_may_join: bool) -> Result<()> {
    let Some((variable, size)) = launcher_size(var) else { return Ok(()) };
    if size <= 1 || mpi_may_join || PROCESS_MANAGER_VARIABLES.iter().any(|name| var(name).is_some()) {
        return Ok(());
    }
    Err(Error::Launch {
        problem: format!(
            "the launcher started {size} processes ({variable}={size}) but gave this one no way to \
             join them (none of {} is set), so each would run as a job of one PE",
            PROCESS_MANAGER_VARIABLES.join(", ")
        ),
        fix: launch_fix(variable).to_string(),
    })
}

/// Check 3: OpenSHMEM's `n_pes` and `my_pe` against the launcher's count and MPI's world.
pub(crate) fn check_launch(
    var: &dyn Fn(&str) -> Option<String>,
    (my_pe, n_pes): (usize, usize),
    (rank, ranks): (usize, usize),
) -> Result<()> {
    if let Some((variable, size)) = launcher_size(var)
        && size != n_pes
    {
        return Err(Error::Launch {
            problem: format!(
                "OpenSHMEM started this process as PE {my_pe} of {n_pes}, but the launcher started \
                 {size} processes ({variable}={size}): the library did not join the launcher's job{}",
                if n_pes == 1 { ", so each process runs alone" } else { "" }
            ),
            fix: launch_fix(variable).to_string(),
        });
    }
    if (my_pe, n_pes) != (rank, ranks) {
        return Err(Error::Launch {
            problem: format!(
                "OpenSHMEM numbers this process PE {my_pe} of {n_pes}, MPI rank {rank} of {ranks}: \
                 the two libraries joined different jobs"
            ),
            fix: "MPI and OpenSHMEM must come from the same installation and one launch: build \
                  against the MPI of the OpenSHMEM's launcher (Open MPI for both implementations \
                  here) and start with that launcher"
                .to_string(),
        });
    }
    Ok(())
}

/// Every PE's outcome of a check it made alone: `Ok` on every PE when all passed; otherwise
/// this PE's own error, or on a PE that passed, one naming the lowest PE that did not.
///
/// # Collective
/// Every PE of `world` calls it.
pub(crate) fn collective_agree(world: &SimpleCommunicator, mine: Result<()>) -> Result<()> {
    let Some(pe) = collective_lowest_pe(world, mine.is_err()) else { return Ok(()) };
    mine.and(Err(Error::Launch {
        problem: format!("PE {pe} found the launch wrong (its message says how)"),
        fix: "see that PE's message".to_string(),
    }))
}

/// The lowest PE of `world` on which `flag` holds, on every PE: one maximum-reduction.
///
/// # Collective
/// Every PE of `world` calls it.
fn collective_lowest_pe(world: &SimpleCommunicator, flag: bool) -> Option<usize> {
    let mut agreement = Agreement::new();
    let lowest = agreement.lowest_pe(flag);
    collective_run(world, agreement).get(lowest)
}

/// `agreement` as one maximum-reduction over MPI's `world`, before the runtime exists.
///
/// # Collective
/// Every PE of `world` calls it with the same terms.
fn collective_run(world: &SimpleCommunicator, agreement: Agreement) -> Agreed {
    agreement.run_with(world.rank() as usize, |words| {
        let mine = words.to_vec();
        world.all_reduce_into(&mine[..], words, SystemOperation::max());
    })
}

/// A setting every PE must share, by name, with this PE's value.
struct Setting {
    name: String,
    value: String,
    fix: &'static str,
}

const SAME_ENVIRONMENT: &str = "export the same value to every PE (`mpirun -x VAR`, `oshrun -x VAR`; \
     `srun` passes the submitting shell's environment unless `--export` says otherwise), and \
     check the nodes' shell start-up files and modules";
const SAME_LIBRARIES: &str = "every node must load the same OpenSHMEM and MPI: check `ldd` of the \
     program, `LD_LIBRARY_PATH` and the loaded modules on each node";

/// The settings the PEs must agree on, with this PE's values: the libraries, the heap's size
/// (in bytes, however written), and the variables whose difference would hang or mislead a
/// job: the library's paths and heap sharing, the transport. Per-PE policies (the wait
/// timeout, oversubscription) and UCX's transports (mixed partitions) may differ.
fn settings(implementation: &str, mpi_library: &str) -> Vec<Setting> {
    let library = |name: &str, value: &str| Setting {
        name: name.to_string(),
        value: value.to_string(),
        fix: SAME_LIBRARIES,
    };
    let mut all =
        vec![library("the OpenSHMEM library", implementation), library("the MPI library", mpi_library)];
    let (heap, setting) = env::heap_size_setting();
    let size = heap_capacity(heap)
        .map_or_else(|| format!("{setting:?}"), |bytes| format!("{bytes} bytes ({setting})"));
    all.push(Setting {
        name: format!("the symmetric heap's size ({heap})"),
        value: size,
        fix: SAME_ENVIRONMENT,
    });
    let transport: &[&str] =
        if cfg!(shmem_sos) { &["SHMEM_OFI_PROVIDER", "FI_PROVIDER"] } else { &["OMPI_MCA_spml"] };
    for name in [env::DIRECT, env::NODE_HEAP, env::TRANSPORT].iter().chain(transport) {
        let value = std::env::var(name).map_or_else(|_| "unset".to_string(), |v| format!("{v:?}"));
        all.push(Setting { name: (*name).to_string(), value, fix: SAME_ENVIRONMENT });
    }
    all
}

/// Check 2: address-space randomisation where CMA needs it off (`breaks` on this PE), in one
/// maximum-reduction over MPI that names the lowest such PE. It runs before OpenSHMEM
/// starts: Sandia OpenSHMEM's first barrier already writes through CMA.
///
/// # Collective
/// Every PE of `world` calls it.
pub(crate) fn collective_check_randomisation(world: &SimpleCommunicator, breaks: bool) -> Result<()> {
    match collective_lowest_pe(world, breaks) {
        Some(pe) => Err(Error::AddressRandomisation { pe }),
        None => Ok(()),
    }
}

/// Check 4: the settings of every PE against PE 0's, in one maximum-reduction over MPI of
/// two words per setting (the hash of its value, [`Agreement::same_bytes`]). Only when
/// something differs do further broadcasts name the PE and the values.
///
/// # Collective
/// Every PE of `world` calls it.
pub(crate) fn collective_check_settings(
    world: &SimpleCommunicator,
    implementation: &str,
    mpi_library: &str,
) -> Result<()> {
    let me = world.rank() as u64;
    let settings = settings(implementation, mpi_library);
    let mut agreement = Agreement::new();
    let same: Vec<_> = settings.iter().map(|s| agreement.same_bytes(s.value.as_bytes())).collect();
    let agreed = collective_run(world, agreement);
    let Some(i) = same.iter().position(|&same| !agreed.get(same)) else { return Ok(()) };
    let setting = &settings[i];
    let first = broadcast_text(world, 0, &setting.value);
    let differs = if setting.value != first { me } else { u64::MAX };
    let mut pe = u64::MAX;
    world.all_reduce_into(&differs, &mut pe, SystemOperation::min());
    let other = broadcast_text(world, pe as i32, &setting.value);
    Err(Error::SettingsDiffer {
        setting: setting.name.clone(),
        pe: pe as usize,
        first,
        other,
        fix: setting.fix.to_string(),
    })
}

/// `text` as PE `root` has it, on every PE of `world`.
///
/// # Collective
/// Every PE of `world` calls it with the same `root`.
fn broadcast_text(world: &SimpleCommunicator, root: i32, text: &str) -> String {
    let process = world.process_at_rank(root);
    let mut len = text.len() as u64;
    process.broadcast_into(&mut len);
    let mut bytes = if world.rank() == root { text.as_bytes().to_vec() } else { vec![0u8; len as usize] };
    process.broadcast_into(&mut bytes[..]);
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Whether the MPI library loaded in this process might join a launcher through Slurm's own
/// PMI library, which needs none of [`PROCESS_MANAGER_VARIABLES`]: `false` only for an Open MPI
/// whose PMI components are known and include neither `s1` nor `s2` (Debian's has PMIx,
/// Flux and isolated); any other MPI, or one whose components are not found, might.
pub(crate) fn mpi_may_join_slurm_pmi() -> bool {
    let Some(library) = mapped_library("libmpi.so") else { return true };
    let dir = library.parent().unwrap_or(std::path::Path::new("/"));
    // Where Open MPI 4 keeps its components: <libdir>/openmpi, or Debian's layout.
    let places = [dir.join("openmpi"), dir.join("openmpi/lib/openmpi3"), dir.join("openmpi/lib/openmpi")];
    for place in places {
        let Ok(entries) = std::fs::read_dir(&place) else { continue };
        let names: Vec<String> = entries.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect();
        if names.iter().any(|n| n.starts_with("mca_pmix_")) {
            return names.iter().any(|n| n == "mca_pmix_s1.so" || n == "mca_pmix_s2.so");
        }
    }
    true
}

/// Whether this process runs with address-space randomisation: not when its personality
/// says `ADDR_NO_RANDOMIZE` (`setarch -R`) or the kernel has it off
/// (`kernel.randomize_va_space = 0`).
pub(crate) fn address_randomised() -> bool {
    const ADDR_NO_RANDOMIZE: u64 = 0x0040000;
    let personality = std::fs::read_to_string("/proc/self/personality")
        .ok()
        .and_then(|p| u64::from_str_radix(p.trim(), 16).ok())
        .unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/randomize_va_space").unwrap_or_default();
    personality & ADDR_NO_RANDOMIZE == 0 && kernel.trim() != "0"
}

/// Whether the OpenSHMEM library in this process reaches the PEs of its node through Linux's
/// cross-memory attach (Sandia OpenSHMEM built `--with-cma`): whether the loaded library (or
/// the program, when it is linked in statically) calls `process_vm_writev`. CMA writes at the
/// sender's own addresses in the receiver, so every PE of a node must have the same layout.
pub(crate) fn library_uses_cma() -> bool {
    if !cfg!(shmem_sos) {
        return false;
    }
    let library = mapped_library("libsma.").unwrap_or_else(|| "/proc/self/exe".into());
    std::fs::read(library).is_ok_and(|bytes| bytes.windows(18).any(|w| w == b"process_vm_writev\0"))
}

/// The path of the first file mapped into this process whose name starts with `prefix`
/// (`/proc/self/maps`): where a shared library was loaded from.
fn mapped_library(prefix: &str) -> Option<std::path::PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .find(|path| path.rsplit('/').next().is_some_and(|file| file.starts_with(prefix)))
        .map(std::path::PathBuf::from)
}

/// The OpenSHMEM library's own name and specification version (`shmem_info_get_name`,
/// `shmem_info_get_version`).
pub(crate) fn implementation_name() -> String {
    let mut name = [0 as std::ffi::c_char; 1024];
    let (mut major, mut minor) = (0, 0);
    // SAFETY: OpenSHMEM is initialised; the buffer is longer than SHMEM_MAX_NAME_LEN (256 in
    // both implementations), which bounds what shmem_info_get_name writes, terminator
    // included; the version pointers are valid.
    unsafe {
        shmem_sys::shmem_info_get_name(name.as_mut_ptr());
        shmem_sys::shmem_info_get_version(&mut major, &mut minor);
    }
    // SAFETY: shmem_info_get_name wrote a NUL-terminated string into the zeroed buffer.
    let vendor = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }.to_string_lossy().into_owned();
    let ours = if cfg!(shmem_sos) { "Sandia OpenSHMEM" } else { "Open MPI's OSHMEM" };
    let vendor = vendor.trim();
    if vendor.is_empty() || vendor == ours {
        format!("{ours} (OpenSHMEM {major}.{minor})")
    } else {
        format!("{ours} (OpenSHMEM {major}.{minor}, vendor {vendor})")
    }
}

/// `MPI_Get_library_version` up to its first comma (`Open MPI v4.1.4`, `MPICH Version: 4.1`).
pub(crate) fn mpi_library_name() -> String {
    mpi::environment::library_version()
        .map(|v| v.lines().next().unwrap_or("").split(',').next().unwrap_or("").trim().to_string())
        .unwrap_or_else(|_| "unknown".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn environment(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: HashMap<String, String> =
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn a_step_without_a_process_manager_is_refused_before_start() {
        let pid = std::process::id().to_string();
        let srun_none =
            environment(&[("SLURM_STEP_NUM_TASKS", "4"), ("SLURM_STEP_ID", "0"), ("SLURM_TASK_PID", &pid)]);
        assert!(check_process_manager(&srun_none, true).is_ok(), "Slurm's PMI might serve the MPI");
        let e = check_process_manager(&srun_none, false).expect_err("no PMI");
        let message = e.to_string();
        assert!(message.contains("started 4 processes (SLURM_STEP_NUM_TASKS=4)"), "{message}");
        assert!(message.contains("srun --mpi=pmix"), "{message}");
        let srun_pmix =
            environment(&[("SLURM_STEP_NUM_TASKS", "4"), ("PMIX_RANK", "2"), ("SLURM_TASK_PID", &pid)]);
        assert!(check_process_manager(&srun_pmix, false).is_ok());
        let alone = environment(&[("SLURM_STEP_NUM_TASKS", "1"), ("SLURM_TASK_PID", &pid)]);
        assert!(check_process_manager(&alone, false).is_ok());
        assert!(check_process_manager(&environment(&[]), false).is_ok());
        // A process started inside a step by something else (a shell of `srun --pty bash`):
        // the step's count is not its job's.
        let inside = environment(&[("SLURM_STEP_NUM_TASKS", "4"), ("SLURM_TASK_PID", "1")]);
        assert!(check_process_manager(&inside, false).is_ok());
        assert!(check_launch(&inside, (0, 2), (0, 2)).is_ok());
    }

    #[test]
    fn a_job_of_the_wrong_size_names_the_launchers_count() {
        let mpirun = environment(&[("OMPI_COMM_WORLD_SIZE", "4"), ("SLURM_STEP_NUM_TASKS", "2")]);
        let e = check_launch(&mpirun, (0, 1), (0, 1)).expect_err("one PE of four");
        let message = e.to_string();
        assert!(message.contains("PE 0 of 1") && message.contains("OMPI_COMM_WORLD_SIZE=4"), "{message}");
        assert!(message.contains("runs alone") && message.contains("oshrun"), "{message}");
        assert!(check_launch(&mpirun, (3, 4), (3, 4)).is_ok());
        let e = check_launch(&environment(&[]), (0, 1), (2, 4)).expect_err("MPI has four");
        assert!(e.to_string().contains("MPI rank 2 of 4"), "{e}");
        assert_eq!(e.scope(), crate::ErrorScope::EveryPe);
    }
}
