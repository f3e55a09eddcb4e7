//! The halo exchange of a water box replicated to about 20 000 and 100 000 atoms, one-sided
//! against MPI in the same run, between 2 PEs: `halo_move_x/{onesided,auto,mpi}/<atoms>` sends
//! coordinates out, `halo_move_f/{onesided,auto,mpi}/<atoms>` sends forces back (`auto`: per
//! neighbour the path its link was measured fastest on, [`Path::Auto`]): each time new
//! forces, written into the step's forces (where a kernel writes them) after an untimed
//! `move_x` and before an untimed barrier. On the one-sided path they leave from there with
//! no staging copy before the neighbour reads them.
//! The periodic images along the dimensions of one domain are the force kernel's
//! ([`PeriodicImages::Kernel`], as in GROMACS and the halo example): the exchanges move what
//! crosses between PEs, and the images' gather and force sums are the kernel's work, not
//! timed here. Figures from before that choice (the images copied by the exchange, on both
//! paths) timed all three pulses of the 1x2x1 grid and do not compare with these.
//!
//! `cargo bench --bench halo` launches 2 PEs through scripts/pe-run, one thread each.

use std::time::{Duration, Instant};

use md_demo::motion;
use md_halo::{DdGrid, HaloExchange, PeriodicImages};
use onesided::{Links, Path, Runtime, Transport};
use onesided_suite::bench::{self, Bench};

const CUTOFF: f32 = 0.9;
const NSTLIST: usize = 10;

fn main() {
    bench::main(2, run);
}

fn run(rt: &Runtime) -> md_demo::Result<()> {
    let mut halos = Vec::new();
    for system in bench::water_systems()? {
        let grid = DdGrid::choose(rt.n_pes(), system.pbc, CUTOFF + motion::buffer_for(NSTLIST, &system.pbc))?;
        for (variant, path, links) in [
            ("onesided", Path::OneSided, None),
            ("auto", Path::Auto, None),
            ("mpi", Path::Mpi, None),
            ("mpi-rma", Path::Auto, Some(Links::uniform(Transport::MpiRma))),
        ] {
            let builder = HaloExchange::builder(rt, grid.clone()).path(path);
            let builder = match links {
                Some(links) => builder.links(links),
                None => builder,
            };
            let halo =
                builder.periodic_images(PeriodicImages::Kernel).collective_from_global(&system.positions)?;
            halos.push((variant, system.len(), std::cell::RefCell::new(halo)));
        }
    }
    let mut benches = Vec::new();
    for (group, forces) in [("halo_move_x", false), ("halo_move_f", true)] {
        for (variant, atoms, halo) in &halos {
            benches.push(Bench::sized(group, variant, *atoms, move |iters| {
                let mut halo = halo.borrow_mut();
                if !forces {
                    let start = Instant::now();
                    for _ in 0..iters {
                        // The step is dropped: no forces go back.
                        let _ = halo.move_x()?;
                    }
                    return Ok(start.elapsed());
                }
                // Each step's forces are new: the force kernel has just written them, so the
                // halo forces sit dirty in the sender's cache, as in an MD step (forces left
                // unchanged would let a receiver that reads them keep a clean copy in its
                // own cache from the previous iteration). move_x, the writes and a barrier
                // are not timed, so each move_f starts on both PEs together.
                let mut total = Duration::ZERO;
                for step in 0..iters {
                    let value = (step % 7) as f32;
                    let mut view = halo.move_x()?;
                    view.local()
                        .forces
                        .iter_mut()
                        .enumerate()
                        .for_each(|(i, x)| *x = [i as f32, value, -1.0]);
                    rt.barrier();
                    let start = Instant::now();
                    view.move_f()?;
                    total += start.elapsed();
                }
                Ok(total)
            }));
        }
    }
    bench::run(rt, benches)?;
    Ok(())
}
