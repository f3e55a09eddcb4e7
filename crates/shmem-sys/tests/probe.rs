//! The library probe on recorded outputs of both implementations, so the Sandia OpenSHMEM
//! path stays honest on machines that only have Open MPI's OSHMEM.

#[allow(dead_code)]
#[path = "../build/probe.rs"]
mod probe;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use probe::{Host, Implementation, SpecVersion, parse_flags, parse_spec_version, probe};

/// A machine described by its variables, the programs it can run and its files.
#[derive(Default)]
struct FakeHost {
    vars: HashMap<String, String>,
    programs: HashMap<String, Result<String, String>>,
    files: HashMap<PathBuf, String>,
}

impl FakeHost {
    fn var(mut self, name: &str, value: &str) -> Self {
        self.vars.insert(name.into(), value.into());
        self
    }
    fn program(mut self, command: &str, output: Result<&str, &str>) -> Self {
        self.programs.insert(command.into(), output.map(Into::into).map_err(Into::into));
        self
    }
    fn file(mut self, path: &str, text: &str) -> Self {
        self.files.insert(path.into(), text.into());
        self
    }
}

impl Host for FakeHost {
    fn var(&self, name: &str) -> Option<String> {
        self.vars.get(name).cloned()
    }
    fn run(&self, program: &str, args: &[&str]) -> Result<String, String> {
        let command = std::iter::once(program).chain(args.iter().copied()).collect::<Vec<_>>().join(" ");
        self.programs.get(&command).cloned().unwrap_or_else(|| Err(format!("`{program}` not found on PATH")))
    }
    fn is_file(&self, path: &Path) -> bool {
        self.files.contains_key(path)
    }
    fn read(&self, path: &Path) -> Option<String> {
        self.files.get(path).cloned()
    }
}

const OMPI: &str = "/usr/lib/x86_64-linux-gnu/openmpi";

/// Lines of Open MPI 4.1.4's shmem.h, as Debian 12 installs it.
const OSHMEM_HEADER: &str = "#ifndef OSHMEM_SHMEM_H\n#define OSHMEM_SHMEM_H\n\
#define OSHMEM_MAJOR_VERSION 4\n#define OSHMEM_MINOR_VERSION 1\n\
#define SHMEM_MAJOR_VERSION             1\n#define SHMEM_MINOR_VERSION             4 \n\
#define SHMEM_VENDOR_STRING             \"http://www.open-mpi.org/\"\n";

/// `oshcc -showme` of Open MPI 4.1.4 on Debian 12.
const OSHMEM_SHOWME: &str = "gcc -I/usr/lib/x86_64-linux-gnu/openmpi/include \
-I/usr/lib/x86_64-linux-gnu/openmpi/include/openmpi -L/usr/lib/x86_64-linux-gnu/openmpi/lib \
-loshmem -lmpi\n";

/// Sandia OpenSHMEM 1.5 keeps the version in shmem-def.h, included by shmem.h.
const SOS_HEADER: &str = "#ifndef SHMEM_H\n#define SHMEM_H\n#include <shmem-def.h>\n";
const SOS_DEFS: &str = "#define  SHMEM_MAJOR_VERSION 1\n#define _SHMEM_MAJOR_VERSION SHMEM_MAJOR_VERSION\n\
#define  SHMEM_MINOR_VERSION 5\n#define _SHMEM_MINOR_VERSION SHMEM_MINOR_VERSION\n\
#define SHMEM_CMP_EQ 1\n#define  SHMEM_SYNC_VALUE 0\n";

/// `pkg-config --cflags --libs sandia-openshmem` of SOS 1.5.3 configured with
/// `--prefix=/opt/sos --with-ofi=/opt/libfabric --enable-pmi-simple`; the `@{libdir}` token
/// is left unexpanded by some releases.
const SOS_PKG_CONFIG: &str = "-I/opt/sos/include -L/opt/sos/lib -L/opt/libfabric/lib \
-Wl,-rpath -Wl,/opt/libfabric/lib -Wl,-rpath -Wl,@{libdir} -Wl,--enable-new-dtags \
-Wl,-rpath -Wl,/opt/sos/lib -lsma -lpmi_simple\n";

/// The same installation's `oshcc -showme`: the compiler, then the same flags.
const SOS_SHOWME: &str = "gcc -I/opt/sos/include -L/opt/sos/lib -L/opt/libfabric/lib \
-Wl,-rpath -Wl,/opt/libfabric/lib -Wl,-rpath -Wl,@{libdir} -Wl,--enable-new-dtags \
-Wl,-rpath -Wl,/opt/sos/lib -lsma -lpmi_simple\n";

const NO_SOS_PC: &str = "Package sandia-openshmem was not found in the pkg-config search path";

fn debian_oshmem() -> FakeHost {
    FakeHost::default()
        .program("pkg-config --cflags --libs sandia-openshmem", Err(NO_SOS_PC))
        .program("pkg-config --cflags --libs sos", Err("Package sos was not found"))
        .program("oshcc -showme", Ok(OSHMEM_SHOWME))
        .file(&format!("{OMPI}/include/shmem.h"), OSHMEM_HEADER)
        .file(&format!("{OMPI}/include/openmpi/opal_config.h"), "")
        .file(&format!("{OMPI}/lib/liboshmem.so"), "")
        .file(&format!("{OMPI}/lib/libmpi.so"), "")
        .file(&format!("{OMPI}/lib/libopen-rte.so"), "")
        .file(&format!("{OMPI}/lib/libopen-pal.so"), "")
}

fn sos_install() -> FakeHost {
    FakeHost::default()
        .file("/opt/sos/include/shmem.h", SOS_HEADER)
        .file("/opt/sos/include/shmem-def.h", SOS_DEFS)
        .file("/opt/sos/lib/libsma.so", "")
}

fn paths(list: &[&str]) -> Vec<PathBuf> {
    list.iter().map(PathBuf::from).collect()
}

#[test]
fn oshmem_is_found_through_oshcc_with_its_runtime_libraries() {
    let install = probe(&debian_oshmem()).expect("Debian's OSHMEM is found");
    assert_eq!(install.implementation, Implementation::Oshmem);
    assert_eq!(install.spec, SpecVersion { major: 1, minor: 4 });
    assert_eq!(install.found_by, "oshcc -showme");
    assert_eq!(install.header, PathBuf::from(format!("{OMPI}/include/shmem.h")));
    assert_eq!(
        install.include_dirs,
        paths(&[&format!("{OMPI}/include"), &format!("{OMPI}/include/openmpi")])
    );
    assert_eq!(install.lib_dirs, paths(&[&format!("{OMPI}/lib")]));
    assert_eq!(install.libs, ["oshmem", "mpi", "open-rte", "open-pal"]);
}

#[test]
fn oshmem_prefix_in_openshmem_dir() {
    let host = debian_oshmem().var("OPENSHMEM_DIR", OMPI);
    let install = probe(&host).expect("the OSHMEM prefix is usable");
    assert_eq!(install.implementation, Implementation::Oshmem);
    assert_eq!(install.found_by, format!("OPENSHMEM_DIR={OMPI}"));
    assert_eq!(install.libs, ["oshmem", "mpi", "open-rte", "open-pal"]);
    assert_eq!(install.include_dirs.len(), 2, "the openmpi/ internal include dir is added");
}

#[test]
fn sos_is_found_through_pkg_config_before_any_oshcc() {
    let host = sos_install()
        .program("pkg-config --cflags --libs sandia-openshmem", Ok(SOS_PKG_CONFIG))
        .program("oshcc -showme", Ok(OSHMEM_SHOWME));
    let install = probe(&host).expect("SOS is found through pkg-config");
    assert_eq!(install.implementation, Implementation::Sos);
    assert_eq!(install.spec, SpecVersion { major: 1, minor: 5 });
    assert_eq!(install.found_by, "pkg-config sandia-openshmem");
    assert_eq!(install.header, PathBuf::from("/opt/sos/include/shmem.h"));
    assert_eq!(install.lib_dirs, paths(&["/opt/sos/lib", "/opt/libfabric/lib"]));
    assert_eq!(install.libs, ["sma", "pmi_simple"]);
}

#[test]
fn sos_with_the_pre_1_5_pkg_config_name() {
    let host = sos_install()
        .program("pkg-config --cflags --libs sandia-openshmem", Err(NO_SOS_PC))
        .program("pkg-config --cflags --libs sos", Ok(SOS_PKG_CONFIG));
    let install = probe(&host).expect("SOS is found under its old pkg-config name");
    assert_eq!(install.found_by, "pkg-config sos");
    assert_eq!(install.implementation, Implementation::Sos);
}

#[test]
fn sos_is_found_through_its_oshcc_wrapper() {
    let host = sos_install()
        .program("pkg-config --cflags --libs sandia-openshmem", Err(NO_SOS_PC))
        .program("oshcc -showme", Ok(SOS_SHOWME));
    let install = probe(&host).expect("SOS is found through oshcc");
    assert_eq!(install.implementation, Implementation::Sos);
    assert_eq!(install.spec, SpecVersion { major: 1, minor: 5 });
    assert_eq!(install.libs, ["sma", "pmi_simple"]);
    assert_eq!(install.include_dirs, paths(&["/opt/sos/include"]));
}

#[test]
fn the_oshcc_variable_names_another_wrapper() {
    let host = sos_install()
        .var("OSHCC", "/opt/sos/bin/oshcc")
        .program("/opt/sos/bin/oshcc -showme", Ok(SOS_SHOWME));
    let install = probe(&host).expect("the wrapper named by OSHCC is used");
    assert_eq!(install.found_by, "/opt/sos/bin/oshcc -showme");
}

#[test]
fn sos_prefix_in_openshmem_dir() {
    let host = sos_install().var("OPENSHMEM_DIR", "/opt/sos");
    let install = probe(&host).expect("the SOS prefix is usable");
    assert_eq!(install.implementation, Implementation::Sos);
    assert_eq!(install.libs, ["sma"]);
    assert_eq!(install.lib_dirs, paths(&["/opt/sos/lib"]));
}

#[test]
fn a_wrong_openshmem_dir_is_reported_and_nothing_else_is_tried() {
    let host = debian_oshmem().var("OPENSHMEM_DIR", "/nonexistent");
    let failure = probe(&host).expect_err("a wrong prefix must not fall back to oshcc");
    assert_eq!(failure.attempts.len(), 1);
    let message = failure.to_string();
    assert!(message.contains("OPENSHMEM_DIR=/nonexistent"), "{message}");
    assert!(message.contains("/nonexistent/include/shmem.h does not exist"), "{message}");
    assert!(message.contains("apt-get install libopenmpi-dev openmpi-bin"), "{message}");
}

#[test]
fn a_prefix_with_a_header_but_no_library_says_where_it_looked() {
    let host = FakeHost::default()
        .var("OPENSHMEM_DIR", "/opt/half")
        .file("/opt/half/include/shmem.h", OSHMEM_HEADER);
    let message = probe(&host).expect_err("no library").to_string();
    assert!(message.contains("neither liboshmem nor libsma in /opt/half/lib, /opt/half/lib64"), "{message}");
}

#[test]
fn nothing_found_lists_every_place_and_reason() {
    let host = FakeHost::default()
        .program("pkg-config --cflags --libs sandia-openshmem", Err(NO_SOS_PC))
        .program("pkg-config --cflags --libs sos", Err("Package sos was not found"));
    let failure = probe(&host).expect_err("nothing is installed");
    let places: Vec<_> = failure.attempts.iter().map(|a| a.place.as_str()).collect();
    assert_eq!(places, ["OPENSHMEM_DIR", "pkg-config sandia-openshmem", "oshcc -showme"]);
    let message = failure.to_string();
    assert!(message.contains("1. OPENSHMEM_DIR: not set"), "{message}");
    assert!(message.contains(NO_SOS_PC), "{message}");
    assert!(message.contains("PKG_CONFIG_PATH is not set"), "{message}");
    assert!(message.contains("`oshcc` not found on PATH"), "{message}");
    assert!(message.contains("apt-get install libopenmpi-dev openmpi-bin"), "{message}");
}

#[test]
fn a_wrapper_whose_header_is_missing_is_a_reason_not_a_panic() {
    let host = FakeHost::default().program("oshcc -showme", Ok("gcc -I/gone/include -L/gone/lib -loshmem"));
    let failure = probe(&host).expect_err("the header is missing");
    let last = failure.attempts.last().expect("three attempts");
    assert!(
        last.reason.contains("no shmem.h in the include directories it gave (/gone/include)"),
        "{}",
        last.reason
    );
}

#[test]
fn a_header_older_than_1_4_is_refused() {
    let old =
        "#define OSHMEM_MAJOR_VERSION 1\n#define SHMEM_MAJOR_VERSION 1\n#define SHMEM_MINOR_VERSION 3\n";
    let host = debian_oshmem().file(&format!("{OMPI}/include/shmem.h"), old);
    let failure = probe(&host).expect_err("1.3 is too old");
    assert!(failure.to_string().contains("declares OpenSHMEM 1.3; version 1.4 or later is needed"));
}

#[test]
fn flags_in_both_spellings() {
    let flags = parse_flags(
        "-I /a/include -I/b -L /a/lib -L/b/lib -Wl,-rpath -Wl,/a/lib -pthread -l sma -lpmi -lsma",
    );
    assert_eq!(flags.include_dirs, paths(&["/a/include", "/b"]));
    assert_eq!(flags.lib_dirs, paths(&["/a/lib", "/b/lib"]));
    assert_eq!(flags.libs, ["sma", "pmi"]);
}

#[test]
fn spec_version_from_both_headers() {
    assert_eq!(parse_spec_version(OSHMEM_HEADER), Some(SpecVersion { major: 1, minor: 4 }));
    assert_eq!(parse_spec_version(SOS_DEFS), Some(SpecVersion { major: 1, minor: 5 }));
    assert_eq!(parse_spec_version(SOS_HEADER), None);
}
