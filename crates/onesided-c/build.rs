//! Lets C hosts of the shared library find the OpenSHMEM library at link and run time when it
//! lives outside the loader's default path (an `OPENSHMEM_DIR` install such as Sandia
//! OpenSHMEM's): shmem-sys exports its library directories, and they become a run path of
//! `libonesided_c.so`, which the linker also follows for the library's own dependencies.

fn main() {
    println!("cargo::rerun-if-env-changed=DEP_OPENSHMEM_LIB_DIR");
    if let Some(dirs) = std::env::var_os("DEP_OPENSHMEM_LIB_DIR") {
        for dir in std::env::split_paths(&dirs) {
            println!("cargo::rustc-cdylib-link-arg=-Wl,-rpath,{}", dir.display());
        }
    }
}
