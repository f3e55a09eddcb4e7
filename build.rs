//! Lets the tests, benchmarks and examples find the OpenSHMEM library at run time when it
//! lives outside the loader's default path (an `OPENSHMEM_DIR` install, say): shmem-sys
//! exports its library directories, and they become an rpath of this package's binaries.

fn main() {
    println!("cargo::rerun-if-env-changed=DEP_OPENSHMEM_LIB_DIR");
    if let Some(dirs) = std::env::var_os("DEP_OPENSHMEM_LIB_DIR") {
        for dir in std::env::split_paths(&dirs) {
            println!("cargo::rustc-link-arg=-Wl,-rpath,{}", dir.display());
        }
    }
}
