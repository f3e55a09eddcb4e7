//! The doctor under the real launcher: its report, and the start-up failures it must end on
//! every PE with a message rather than a hang or a crash.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use onesided::launch::Launch;

const DOCTOR: &str = env!("CARGO_BIN_EXE_onesided-doctor");

/// Runs `command`, failing the test if it has not ended within two minutes (a hang).
fn run(mut command: Command) -> Output {
    let started = Instant::now();
    let mut child =
        command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("the launcher starts");
    while child.try_wait().expect("waitable").is_none() {
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("the job did not end within 120 s: {command:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.wait_with_output().expect("the output")
}

fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The doctor under `launch`, PE `odd` (by the launcher's rank) started with `setting`
/// exported.
fn doctor(launch: Launch, odd: Option<(usize, &str)>) -> Output {
    let mut command = launch.command("sh").expect("a launcher");
    let export = odd.map_or(String::new(), |(pe, setting)| {
        format!("if [ \"$OMPI_COMM_WORLD_RANK\" = {pe} ]; then export {setting}; fi; ")
    });
    command.arg("-c").arg(format!("{export}exec \"$0\"")).arg(DOCTOR);
    run(command)
}

#[test]
fn the_doctor_reports_every_node_and_carries_traffic() {
    let output = doctor(Launch::new(3), None);
    let (out, err) = text(&output);
    assert!(output.status.success(), "{out}\n{err}");
    let first = out.lines().next().unwrap_or("");
    assert!(first.starts_with("3 PEs on 1 node (3 per node); "), "{first}");
    assert!(first.contains("Open MPI's OSHMEM") || first.contains("Sandia OpenSHMEM"), "{first}");
    assert!(first.contains("heap ") && first.contains(" MiB ("), "{first}");
    assert!(out.contains("(PEs 0-2):"), "{out}");
    assert!(out.contains("  between its PEs: "), "{out}");
    assert!(out.contains("traffic: every PE's put and signal reached the next PE (3 PEs): ok"), "{out}");
}

#[test]
fn pes_that_disagree_on_a_setting_end_together_naming_it() {
    let output = doctor(Launch::new(3), Some((2, "ONESIDED_DIRECT=0")));
    let (out, err) = text(&output);
    assert!(!output.status.success(), "{out}\n{err}");
    let told = "the PEs disagree on ONESIDED_DIRECT: PE 0 has unset, PE 2 has \"0\"; export the same value";
    // Every PE returns it (the launcher may end the others once one has exited, before they
    // print), and none was left waiting.
    assert!(err.contains(told), "{err}");
    assert_eq!(err.matches("onesided-doctor:").count(), err.matches(told).count(), "{err}");
    assert!(!out.contains("traffic"), "{out}");
}

#[test]
fn address_randomisation_is_refused_where_cma_needs_it_off() {
    let output = doctor(Launch::new(2).address_randomisation(true), None);
    let (out, err) = text(&output);
    if err.contains("onesided-doctor: start-up failed") {
        // Sandia OpenSHMEM with CMA: refused on every PE before its first barrier.
        let told = "runs with address-space randomisation on, and Sandia OpenSHMEM here reaches the PEs \
                    of a node through CMA";
        assert_eq!(err.matches("onesided-doctor:").count(), err.matches(told).count(), "{err}");
        assert!(err.contains("setarch"), "{err}");
        assert!(!err.contains("Signal: Aborted") && !output.status.success(), "{err}");
    } else {
        // Without CMA (Open MPI's OSHMEM, a Sandia OpenSHMEM built without it), or with
        // randomisation off machine-wide, it is no matter.
        assert!(output.status.success(), "{out}\n{err}");
        let kernel = std::fs::read_to_string("/proc/sys/kernel/randomize_va_space").unwrap_or_default();
        if kernel.trim() != "0" {
            assert!(out.contains("address-space randomisation: on"), "{out}");
        }
    }
}
