//! Build script of shmem-sys: finds OpenSHMEM (see `probe.rs` for the order), compiles the C
//! shim, generates the bindings and tells cargo and dependent build scripts what it found.
//!
//! Exported to dependents' build scripts through `links = "openshmem"`:
//! - `DEP_OPENSHMEM_IMPLEMENTATION`: `oshmem` or `sos`;
//! - `DEP_OPENSHMEM_SPEC_VERSION`: the header's specification version, e.g. `1.4`;
//! - `DEP_OPENSHMEM_LIB_DIR`: the library directories, separated by the platform's path
//!   separator, for an rpath;
//! - `DEP_OPENSHMEM_INCLUDE`: the include directories, likewise.
//!
//! For this crate it sets `cfg(shmem_oshmem)` or `cfg(shmem_sos)`, and `cfg(shmem_spec_1_5)`
//! for a header of 1.5 or later; `onesided`'s build script turns the exported facts into the
//! same cfgs.
//!
//! A documentation-only build (`DOCS_RS` set, as docs.rs sets it, or `SHMEM_SYS_DOCS_ONLY`)
//! looks for no library: it takes the bindings generated ahead in `bindings/` (Sandia
//! OpenSHMEM 1.5 unless `SHMEM_SYS_DOCS_BINDINGS=oshmem-1.4`), compiles and links nothing, and
//! exports the implementation and version of those bindings (empty directories).

mod probe;

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

use probe::{Host, Implementation, Install};

/// The machine the build runs on.
struct RealHost;

impl Host for RealHost {
    fn var(&self, name: &str) -> Option<String> {
        env::var(name).ok().filter(|v| !v.is_empty())
    }

    fn run(&self, program: &str, args: &[&str]) -> Result<String, String> {
        let output = Command::new(program).args(args).output().map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                format!("`{program}` not found on PATH")
            } else {
                format!("cannot run `{program}`: {e}")
            }
        })?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let first = stderr.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
            Err(format!("`{program} {}` failed ({}): {first}", args.join(" "), output.status))
        }
    }

    fn is_file(&self, path: &Path) -> bool {
        path.is_file()
    }

    fn read(&self, path: &Path) -> Option<String> {
        std::fs::read_to_string(path).ok()
    }
}

const SPEC_1_5: probe::SpecVersion = probe::SpecVersion { major: 1, minor: 5 };

fn main() {
    for var in probe::VARIABLES_READ {
        println!("cargo::rerun-if-env-changed={var}");
    }
    println!("cargo::rerun-if-changed=build");
    println!("cargo::rerun-if-changed=shim");
    println!("cargo::rustc-check-cfg=cfg(shmem_oshmem, shmem_sos, shmem_spec_1_5)");
    for var in ["DOCS_RS", "SHMEM_SYS_DOCS_ONLY", "SHMEM_SYS_DOCS_BINDINGS"] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    if RealHost.var("DOCS_RS").is_some() || RealHost.var("SHMEM_SYS_DOCS_ONLY").is_some() {
        docs_only();
        return;
    }

    let install = match probe::probe(&RealHost) {
        Ok(install) => install,
        Err(failure) => {
            eprintln!("{failure}");
            std::process::exit(1);
        }
    };
    println!("cargo::rerun-if-changed={}", install.header.display());
    // Shown with `cargo build -vv`.
    eprintln!(
        "shmem-sys: {} {} (OpenSHMEM {}) found by {}",
        match install.implementation {
            Implementation::Oshmem => "Open MPI OSHMEM",
            Implementation::Sos => "Sandia OpenSHMEM",
        },
        install.header.display(),
        install.spec,
        install.found_by
    );

    compile_shim(&install);
    generate_bindings(&install);
    emit_link(&install);
    export(&install);
}

/// The bindings generated ahead, by name: what each was generated from.
const AHEAD: [(&str, Implementation, probe::SpecVersion); 2] = [
    ("sos-1.5", Implementation::Sos, SPEC_1_5),
    ("oshmem-1.4", Implementation::Oshmem, probe::SpecVersion { major: 1, minor: 4 }),
];

/// A documentation-only build: the bindings generated ahead, no library.
fn docs_only() {
    let wanted = RealHost.var("SHMEM_SYS_DOCS_BINDINGS").unwrap_or_else(|| AHEAD[0].0.to_string());
    let Some(&(name, implementation, spec)) = AHEAD.iter().find(|(name, ..)| *name == wanted) else {
        eprintln!(
            "shmem-sys: SHMEM_SYS_DOCS_BINDINGS={wanted:?} names no bindings generated ahead; use one of {}",
            AHEAD.map(|(name, ..)| name).join(", ")
        );
        std::process::exit(1);
    };
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::copy(manifest.join("bindings").join(format!("{name}.rs")), out.join("bindings.rs"))
        .expect("copy the bindings generated ahead to OUT_DIR");
    write_install(&out, implementation, spec);
    eprintln!("shmem-sys: documentation only, with the bindings of {name} generated ahead; nothing linked");
    emit_cfgs(implementation, spec);
    println!("cargo::metadata=implementation={}", implementation.name());
    println!("cargo::metadata=spec_version={spec}");
    println!("cargo::metadata=lib_dir=");
    println!("cargo::metadata=include=");
}

fn shim_dir() -> PathBuf {
    PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join("shim")
}

fn compile_shim(install: &Install) {
    let mut build = cc::Build::new();
    build.file(shim_dir().join("shim.c")).warnings(true);
    for dir in &install.include_dirs {
        build.include(dir);
    }
    build.compile("shmem_sys_shim");
}

fn generate_bindings(install: &Install) {
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let wrapper = out.join("wrapper.h");
    let text = format!("#include <shmem.h>\n#include \"{}\"\n", shim_dir().join("shim.h").display());
    // Written only when it changes: bindgen names it as an input of the build, and a newer
    // copy on every run would make cargo rebuild this crate and everything above it each time.
    if std::fs::read_to_string(&wrapper).ok().as_deref() != Some(text.as_str()) {
        std::fs::write(&wrapper, text).expect("write the bindgen wrapper header to OUT_DIR");
    }

    // C99 makes the headers skip their C11 `_Generic` convenience macros and the static inline
    // helpers that come with them.
    let mut builder = bindgen::Builder::default()
        .header(wrapper.display().to_string())
        .clang_arg("-std=c99")
        .allowlist_function("shmem_.*")
        .allowlist_var("shmem_sys_.*")
        .allowlist_var("SHMEM_.*")
        .allowlist_type("shmem_ctx_t|shmem_team_t|shmem_team_config_t")
        // Routines on `long double` and complex numbers have no portable Rust type.
        .blocklist_function(".*longdouble.*|.*complex.*")
        .use_core()
        .layout_tests(true)
        .generate_comments(false)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for dir in &install.include_dirs {
        builder = builder.clang_arg(format!("-I{}", dir.display()));
    }
    let bindings = builder.generate().unwrap_or_else(|e| {
        eprintln!(
            "shmem-sys: bindgen could not parse {} ({e}). bindgen needs libclang: \
             apt-get install libclang-dev clang",
            install.header.display()
        );
        std::process::exit(1);
    });
    bindings.write_to_file(out.join("bindings.rs")).expect("write bindings.rs to OUT_DIR");
    write_install(&out, install.implementation, install.spec);
}

/// `install.rs`: what the bindings were generated from, as constants.
fn write_install(out: &Path, implementation: Implementation, spec: probe::SpecVersion) {
    let info = format!(
        "/// The implementation the bindings were generated from: `\"oshmem\"` or `\"sos\"`.\n\
         pub const IMPLEMENTATION: &str = {:?};\n\
         /// The specification version `(major, minor)` of the header the bindings come from.\n\
         pub const SPEC_VERSION: (u32, u32) = ({}, {});\n",
        implementation.name(),
        spec.major,
        spec.minor
    );
    std::fs::write(out.join("install.rs"), info).expect("write install.rs to OUT_DIR");
}

fn emit_link(install: &Install) {
    for dir in &install.lib_dirs {
        println!("cargo::rustc-link-search=native={}", dir.display());
    }
    for lib in &install.libs {
        println!("cargo::rustc-link-lib=dylib={lib}");
    }
    // The shim's shmem_sys_progress calls opal_progress, which lives in Open PAL.
    if install.implementation == Implementation::Oshmem && !install.libs.iter().any(|lib| lib == "open-pal") {
        println!("cargo::rustc-link-lib=dylib=open-pal");
    }
    emit_cfgs(install.implementation, install.spec);
}

fn emit_cfgs(implementation: Implementation, spec: probe::SpecVersion) {
    match implementation {
        Implementation::Oshmem => println!("cargo::rustc-cfg=shmem_oshmem"),
        Implementation::Sos => println!("cargo::rustc-cfg=shmem_sos"),
    }
    if spec >= SPEC_1_5 {
        println!("cargo::rustc-cfg=shmem_spec_1_5");
    }
}

fn export(install: &Install) {
    let join = |dirs: &[PathBuf]| {
        env::join_paths(dirs)
            .expect("library and include directories contain no path separator")
            .to_string_lossy()
            .into_owned()
    };
    println!("cargo::metadata=implementation={}", install.implementation.name());
    println!("cargo::metadata=spec_version={}", install.spec);
    println!("cargo::metadata=lib_dir={}", join(&install.lib_dirs));
    println!("cargo::metadata=include={}", join(&install.include_dirs));
}
