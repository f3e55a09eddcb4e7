//! Finding the installed OpenSHMEM library.
//!
//! The probe tries three places, in this order, and stops at the first that yields a usable
//! installation (a `shmem.h` it can read and the libraries to link):
//!
//! 1. `OPENSHMEM_DIR`: an installation prefix holding `include/shmem.h` and a library
//!    directory (`lib`, `lib64` or `lib/<multiarch>`) with `liboshmem` (Open MPI's OSHMEM) or
//!    `libsma` (Sandia OpenSHMEM). When the variable is set, it is the only place tried: a
//!    wrong prefix is an error, not a reason to pick another installation silently.
//! 2. `pkg-config sandia-openshmem`: Sandia OpenSHMEM installs this file (releases before
//!    1.5 named it `sos`, which is tried next).
//! 3. `oshcc -showme`: the compiler wrapper of Open MPI's OSHMEM prints the full compile and
//!    link line (Sandia's wrapper accepts the flag too). The wrapper's name can be overridden
//!    with `OSHCC`.
//!
//! When nothing is found, [`ProbeFailure`] lists every place tried and why it failed.
//!
//! Everything the probe learns from the machine goes through [`Host`], so the parsing and the
//! decisions are tested on recorded outputs of both implementations (`tests/probe.rs`).

use std::fmt;
use std::path::{Path, PathBuf};

/// Environment variables the probe reads; the build script reruns when any changes.
pub const VARIABLES_READ: &[&str] =
    &["OPENSHMEM_DIR", "OSHCC", "PKG_CONFIG_PATH", "PKG_CONFIG_LIBDIR", "PKG_CONFIG_SYSROOT_DIR", "PATH"];

/// What the probe may ask of the machine.
pub trait Host {
    /// The value of an environment variable, if set and valid Unicode.
    fn var(&self, name: &str) -> Option<String>;
    /// Runs a program and returns its standard output, or why it could not be run or failed.
    fn run(&self, program: &str, args: &[&str]) -> Result<String, String>;
    /// Whether a regular file exists at `path`.
    fn is_file(&self, path: &Path) -> bool;
    /// The text of a file, if readable.
    fn read(&self, path: &Path) -> Option<String>;
}

/// Which OpenSHMEM implementation an installation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Implementation {
    /// Open MPI's OSHMEM.
    Oshmem,
    /// Sandia OpenSHMEM (SOS).
    Sos,
}

impl Implementation {
    /// The short name exported to dependent build scripts.
    pub fn name(self) -> &'static str {
        match self {
            Implementation::Oshmem => "oshmem",
            Implementation::Sos => "sos",
        }
    }
}

/// The OpenSHMEM specification version a header declares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SpecVersion {
    /// `SHMEM_MAJOR_VERSION`.
    pub major: u32,
    /// `SHMEM_MINOR_VERSION`.
    pub minor: u32,
}

impl fmt::Display for SpecVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// A usable installation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Install {
    /// Where it was found, for the build log.
    pub found_by: String,
    /// The implementation.
    pub implementation: Implementation,
    /// The specification version of its header.
    pub spec: SpecVersion,
    /// The `shmem.h` the bindings are generated from.
    pub header: PathBuf,
    /// Directories to pass to the C compiler with `-I`.
    pub include_dirs: Vec<PathBuf>,
    /// Directories to search for the libraries.
    pub lib_dirs: Vec<PathBuf>,
    /// Libraries to link, without the `lib` prefix.
    pub libs: Vec<String>,
}

/// One place the probe looked at and why it was not usable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    /// The place, as a user would name it.
    pub place: String,
    /// Why it failed.
    pub reason: String,
}

/// Every place tried, with its reason, when no installation was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeFailure {
    /// The attempts, in the order they were made.
    pub attempts: Vec<Attempt>,
}

impl fmt::Display for ProbeFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "shmem-sys: no usable OpenSHMEM installation found. Tried, in order:")?;
        for (i, attempt) in self.attempts.iter().enumerate() {
            writeln!(f, "  {}. {}: {}", i + 1, attempt.place, attempt.reason)?;
        }
        writeln!(f)?;
        writeln!(f, "To install Open MPI's OpenSHMEM (OSHMEM) on Debian or Ubuntu:")?;
        writeln!(f, "    apt-get install libopenmpi-dev openmpi-bin")?;
        writeln!(
            f,
            "or point at an installation prefix that holds include/shmem.h and lib/ \
             (Open MPI or Sandia OpenSHMEM):"
        )?;
        writeln!(f, "    OPENSHMEM_DIR=/path/to/prefix cargo build")?;
        write!(
            f,
            "A Sandia OpenSHMEM install is also found through pkg-config: add its \
             lib/pkgconfig directory to PKG_CONFIG_PATH."
        )
    }
}

/// Finds the installation, trying the places in the documented order.
pub fn probe(host: &dyn Host) -> Result<Install, ProbeFailure> {
    if let Some(prefix) = host.var("OPENSHMEM_DIR") {
        return from_prefix(host, Path::new(&prefix)).map_err(|reason| ProbeFailure {
            attempts: vec![Attempt {
                place: format!("OPENSHMEM_DIR={prefix}"),
                reason: format!(
                    "{reason}; fix the prefix or unset OPENSHMEM_DIR to search pkg-config and oshcc"
                ),
            }],
        });
    }
    let mut attempts = vec![Attempt { place: "OPENSHMEM_DIR".to_string(), reason: "not set".to_string() }];
    match from_pkg_config(host) {
        Ok(install) => return Ok(install),
        Err(reason) => attempts.push(Attempt { place: "pkg-config sandia-openshmem".to_string(), reason }),
    }
    let oshcc = host.var("OSHCC").unwrap_or_else(|| "oshcc".to_string());
    match from_wrapper(host, &oshcc) {
        Ok(install) => Ok(install),
        Err(reason) => {
            attempts.push(Attempt { place: format!("{oshcc} -showme"), reason });
            Err(ProbeFailure { attempts })
        }
    }
}

/// Library directories under a prefix, in the order they are searched.
const LIB_SUBDIRS: &[&str] = &["lib", "lib64", "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu"];

fn from_prefix(host: &dyn Host, prefix: &Path) -> Result<Install, String> {
    let include_dir = prefix.join("include");
    let header = include_dir.join("shmem.h");
    if !host.is_file(&header) {
        return Err(format!("{} does not exist", header.display()));
    }
    let mut tried = Vec::new();
    for sub in LIB_SUBDIRS {
        let dir = prefix.join(sub);
        for (lib, implementation) in [("oshmem", Implementation::Oshmem), ("sma", Implementation::Sos)] {
            if host.is_file(&dir.join(format!("lib{lib}.so")))
                || host.is_file(&dir.join(format!("lib{lib}.a")))
            {
                let mut include_dirs = vec![include_dir.clone()];
                if implementation == Implementation::Oshmem {
                    // Open MPI keeps its internal headers one level down.
                    let internal = include_dir.join("openmpi");
                    if host.is_file(&internal.join("opal_config.h")) {
                        include_dirs.push(internal);
                    }
                }
                let flags = Flags { include_dirs, lib_dirs: vec![dir], libs: vec![lib.to_string()] };
                return finish(host, format!("OPENSHMEM_DIR={}", prefix.display()), flags);
            }
        }
        tried.push(dir.display().to_string());
    }
    Err(format!("found {} but neither liboshmem nor libsma in {}", header.display(), tried.join(", ")))
}

/// The names Sandia OpenSHMEM's pkg-config file had over its releases, newest first.
const PKG_CONFIG_NAMES: &[&str] = &["sandia-openshmem", "sos"];

fn from_pkg_config(host: &dyn Host) -> Result<Install, String> {
    let mut reasons = Vec::new();
    for name in PKG_CONFIG_NAMES {
        match host.run("pkg-config", &["--cflags", "--libs", name]) {
            Ok(output) => return finish(host, format!("pkg-config {name}"), parse_flags(&output)),
            Err(e) => reasons.push(e),
        }
    }
    let path = match host.var("PKG_CONFIG_PATH") {
        Some(path) => format!("PKG_CONFIG_PATH={path}"),
        None => "PKG_CONFIG_PATH is not set".to_string(),
    };
    Err(format!("{} ({path})", reasons.join("; ")))
}

fn from_wrapper(host: &dyn Host, oshcc: &str) -> Result<Install, String> {
    let output = host.run(oshcc, &["-showme"])?;
    let line = output.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    // The first word is the underlying C compiler; the rest are its flags.
    let flags_text = line.split_whitespace().skip(1).collect::<Vec<_>>().join(" ");
    if flags_text.is_empty() {
        return Err(format!("printed no compiler flags: {:?}", output.trim()));
    }
    finish(host, format!("{oshcc} -showme"), parse_flags(&flags_text))
}

/// Compiler and linker flags that matter for finding the library.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Flags {
    /// `-I` directories.
    pub include_dirs: Vec<PathBuf>,
    /// `-L` directories.
    pub lib_dirs: Vec<PathBuf>,
    /// `-l` libraries.
    pub libs: Vec<String>,
}

/// Parses the `-I`, `-L` and `-l` flags of a compile or link line; `-Wl,` options and other
/// flags are ignored. Both `-Ldir` and `-L dir` forms are accepted.
pub fn parse_flags(line: &str) -> Flags {
    let mut flags = Flags::default();
    let mut words = line.split_whitespace();
    while let Some(word) = words.next() {
        let mut take = |prefix: &str| -> Option<String> {
            let rest = word.strip_prefix(prefix)?;
            if rest.is_empty() { words.next().map(str::to_string) } else { Some(rest.to_string()) }
        };
        if let Some(dir) = take("-I") {
            push_unique(&mut flags.include_dirs, PathBuf::from(dir));
        } else if let Some(dir) = take("-L") {
            push_unique(&mut flags.lib_dirs, PathBuf::from(dir));
        } else if let Some(lib) = take("-l") {
            push_unique(&mut flags.libs, lib);
        }
    }
    flags
}

fn push_unique<T: PartialEq>(list: &mut Vec<T>, item: T) {
    if !list.contains(&item) {
        list.push(item);
    }
}

/// Include directories a C compiler searches without being told.
const SYSTEM_INCLUDE_DIRS: &[&str] = &["/usr/local/include", "/usr/include"];

fn finish(host: &dyn Host, found_by: String, mut flags: Flags) -> Result<Install, String> {
    let header = flags
        .include_dirs
        .iter()
        .map(PathBuf::as_path)
        .chain(SYSTEM_INCLUDE_DIRS.iter().map(Path::new))
        .map(|dir| dir.join("shmem.h"))
        .find(|h| host.is_file(h))
        .ok_or_else(|| {
            format!("no shmem.h in the include directories it gave ({})", display_dirs(&flags.include_dirs))
        })?;
    let mut text = host.read(&header).ok_or_else(|| format!("cannot read {}", header.display()))?;
    // Sandia OpenSHMEM keeps its constants in a second header next to shmem.h.
    if let Some(defs) = header.parent().and_then(|dir| host.read(&dir.join("shmem-def.h"))) {
        text.push_str(&defs);
    }
    let spec = parse_spec_version(&text).ok_or_else(|| {
        format!(
            "{} (and a shmem-def.h beside it) define no SHMEM_MAJOR_VERSION and \
             SHMEM_MINOR_VERSION",
            header.display()
        )
    })?;
    let implementation = detect_implementation(&text, &flags.libs).ok_or_else(|| {
        format!(
            "{} is neither Open MPI's OSHMEM nor Sandia OpenSHMEM (libraries: {})",
            header.display(),
            flags.libs.join(" ")
        )
    })?;
    if spec < (SpecVersion { major: 1, minor: 4 }) {
        return Err(format!(
            "{} declares OpenSHMEM {spec}; version 1.4 or later is needed",
            header.display()
        ));
    }
    if implementation == Implementation::Oshmem {
        add_oshmem_runtime_libs(host, &mut flags);
    }
    Ok(Install {
        found_by,
        implementation,
        spec,
        header,
        include_dirs: flags.include_dirs,
        lib_dirs: flags.lib_dirs,
        libs: flags.libs,
    })
}

/// Debian's `liboshmem.so` uses symbols of Open MPI's MPI, run-time and portability layers
/// without listing all of those libraries as dependencies; linkers that do not search
/// indirect dependencies (rust-lld among them) then fail. Link them explicitly when present.
fn add_oshmem_runtime_libs(host: &dyn Host, flags: &mut Flags) {
    for lib in ["mpi", "open-rte", "open-pal"] {
        let present = flags.lib_dirs.iter().any(|dir| host.is_file(&dir.join(format!("lib{lib}.so"))));
        if present {
            push_unique(&mut flags.libs, lib.to_string());
        }
    }
}

fn display_dirs(dirs: &[PathBuf]) -> String {
    if dirs.is_empty() {
        "none".to_string()
    } else {
        dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
    }
}

/// Reads `SHMEM_MAJOR_VERSION` and `SHMEM_MINOR_VERSION` from the text of `shmem.h`.
pub fn parse_spec_version(header: &str) -> Option<SpecVersion> {
    let define = |name: &str| -> Option<u32> {
        header.lines().find_map(|line| {
            let mut words = line.split_whitespace();
            if words.next()? != "#define" || words.next()? != name {
                return None;
            }
            words.next()?.trim_matches(|c| c == '(' || c == ')').parse().ok()
        })
    };
    Some(SpecVersion { major: define("SHMEM_MAJOR_VERSION")?, minor: define("SHMEM_MINOR_VERSION")? })
}

/// Tells the implementation from its header and the libraries it links.
pub fn detect_implementation(header: &str, libs: &[String]) -> Option<Implementation> {
    if header.contains("OSHMEM_") || libs.iter().any(|l| l == "oshmem") {
        Some(Implementation::Oshmem)
    } else if libs.iter().any(|l| l == "sma") {
        Some(Implementation::Sos)
    } else {
        None
    }
}
