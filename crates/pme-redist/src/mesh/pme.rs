//! A whole PME mesh step on the PME ranks: spread, distributed FFT, solve, backward FFT,
//! gather, with the time of each phase under the names of GROMACS's cycle accounting.

use std::time::{Duration, Instant};

use mpi::traits::{Communicator, CommunicatorCollectives, Root};
use onesided::watchdog::watch;
use onesided::{AlltoallAlgorithm, Path, PeGroup, Runtime};

use super::fft::MeshFft;
use super::solve::{PmeEnergy, Reciprocal};
use super::spread::SlabGrid;
use crate::error::{Error, Result};
use crate::grid::PmeGrid;
use crate::particle::{Mesh, pes_fingerprint};

/// Time spent per phase since the [`Pme`] was made (or [`reset`](PmeTimes::reset)), under
/// the names of GROMACS's log.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PmeTimes {
    /// `PME spread`: the charges onto the slab, and the overlap planes to the slab below.
    pub spread: Duration,
    /// `PME 3D-FFT`: the 1-D transforms, the unpacking after the transposes and, on the MPI
    /// paths, the packing before them, both ways.
    pub fft: Duration,
    /// `PME 3D-FFT Comm.`: the transposes' communication, both ways (see
    /// [`MeshFft::transpose_time`]; on the one-sided paths it holds the packing).
    pub fft_comm: Duration,
    /// `PME solve Elec`: energy and convolution.
    pub solve: Duration,
    /// `PME gather`: the overlap planes back from the slab below, and the forces.
    pub gather: Duration,
    /// Steps timed.
    pub steps: u64,
}

impl PmeTimes {
    /// Starts again from zero.
    pub fn reset(&mut self) {
        *self = PmeTimes::default();
    }

    /// `(GROMACS's name, time)` of each phase, in step order.
    pub fn phases(&self) -> [(&'static str, Duration); 5] {
        [
            ("PME spread", self.spread),
            ("PME 3D-FFT", self.fft),
            ("PME 3D-FFT Comm.", self.fft_comm),
            ("PME solve Elec", self.solve),
            ("PME gather", self.gather),
        ]
    }
}

/// Smooth PME's mesh part over the PME ranks of a [`PmeGrid`].
///
/// # What a step computes
/// Each step gives the reciprocal forces on the atoms a PME rank received and a share of
/// [`PmeEnergy`]: the reciprocal energy, the sum over the wave vectors `m ≠ 0` of smooth PME
/// (Essmann et al. 1995) in GROMACS's units, and its virial `Ξ = -½ Σ r ⊗ F` from the solve
/// (as GROMACS's `solve_pme_yzx`). Neither holds
///
/// - the self energy, `-f β / √π Σ q²` ([`ewald_self_energy`](crate::ewald_self_energy)),
///   constant for fixed charges: an engine adds it to its electrostatic energy (GROMACS
///   counts it in `Coulomb (SR)`);
/// - the net-charge correction of a charged system, `-π f Q² / (2 V β²)` with its virial
///   ([`PmeEnergy::charge_correction`]; GROMACS counts it in `Coul. recip.`);
/// - the real-space part `erfc(β r) / r` within the cutoff and the exclusion corrections,
///   which the engine's short-range kernel computes.
///
/// The whole electrostatic energy is the sum of the four; the pressure is
/// `P = 2 / (3V) (E_kin - Ξ)` with `Ξ` the short-range virial (md-halo's shift forces) plus
/// the mesh's and the correction's.
pub struct Pme<'rt> {
    /// The grid's PME ranks, for the energy's reduction.
    group: PeGroup<'rt>,
    slab: SlabGrid<'rt>,
    fft: MeshFft<'rt>,
    solver: Option<Reciprocal>,
    times: PmeTimes,
    /// The group's PEs ([`pes_fingerprint`]): a redistribution over the same PME ranks leaves
    /// its vote on each step's error to this mesh's transposes.
    pes: u64,
}

/// The choices a [`Pme`] is built with ([`Pme::builder`]).
#[derive(Clone, Debug)]
#[must_use = "a builder builds nothing until collective_build"]
pub struct PmeBuilder<'rt> {
    rt: &'rt Runtime,
    grid: PmeGrid,
    beta: f64,
    path: Path,
    fft_path: Option<Path>,
    fft_algorithm: Option<AlltoallAlgorithm>,
}

impl<'rt> Pme<'rt> {
    /// Starts building the mesh part of PME on `grid` with Ewald coefficient `beta` (nm⁻¹; see
    /// [`ewald_coefficient`](crate::ewald_coefficient)) over the grid's PME ranks, on
    /// [`Path::OneSided`] unless the builder says otherwise. The mesh makes and owns the PE
    /// groups it needs, so it borrows only the runtime, and an engine keeps it in its own
    /// state beside the redistribution (and md-halo's `HaloExchange<'rt>`, which borrows the
    /// runtime alone too):
    ///
    /// ```no_run
    /// use onesided::Runtime;
    /// use pme_redist::{Pme, PmeGrid, Redistribution};
    ///
    /// /// What an engine's long-range step communicates with, in one place.
    /// struct LongRange<'rt> {
    ///     redistribution: Redistribution<'rt>,
    ///     mesh: Pme<'rt>,
    /// }
    ///
    /// fn build<'rt>(rt: &'rt Runtime, grid: PmeGrid) -> pme_redist::Result<LongRange<'rt>> {
    ///     let home = Vec::new(); // this PE's home atoms as pme_redist::Particle
    ///     let redistribution = Redistribution::builder(rt, grid.clone()).collective_build(&home)?;
    ///     let mesh = Pme::builder(rt, &grid, 3.47).collective_build()?;
    ///     Ok(LongRange { redistribution, mesh })
    /// }
    /// ```
    pub fn builder(rt: &'rt Runtime, grid: &PmeGrid, beta: f64) -> PmeBuilder<'rt> {
        PmeBuilder { rt, grid: grid.clone(), beta, path: Path::OneSided, fft_path: None, fft_algorithm: None }
    }
}

impl<'rt> PmeBuilder<'rt> {
    /// The path of the overlap planes between slabs and of the FFT's transposes:
    /// [`Path::OneSided`] (the default), [`Path::Mpi`], or [`Path::Auto`] (the overlaps per
    /// partner on its link's transport, the transposes on the all-to-all measured fastest).
    pub fn path(self, path: Path) -> Self {
        PmeBuilder { path, ..self }
    }

    /// The path of the FFT's transposes alone, where it differs from
    /// [`path`](Self::path)'s.
    pub fn fft_path(self, path: Path) -> Self {
        PmeBuilder { fft_path: Some(path), ..self }
    }

    /// One all-to-all algorithm for the FFT's transposes, whatever the paths: for benchmarks
    /// and tests of each.
    pub fn fft_algorithm(self, algorithm: AlltoallAlgorithm) -> Self {
        PmeBuilder { fft_algorithm: Some(algorithm), ..self }
    }

    /// Builds the mesh.
    ///
    /// # Collective
    /// Every PE of the job must call it with the same choices.
    ///
    /// # Errors
    /// [`Error::Config`] for a `beta` that is not positive or a path the PME ranks cannot use;
    /// [`Error::Comm`] when a group cannot be made or the symmetric heap is too small.
    pub fn collective_build(self) -> Result<Pme<'rt>> {
        let PmeBuilder { rt, grid, beta, path, fft_path, fft_algorithm } = self;
        let grid = &grid;
        let (overlap_path, fft_path) = (path, fft_path.unwrap_or(path));
        let pes: Vec<usize> = (0..grid.ranks()).map(|r| grid.pe_of(r)).collect();
        let group = PeGroup::collective_new(rt, "pme", &pes)?;
        let fft = MeshFft::collective_new(rt, grid, fft_path, fft_algorithm)?;
        let slab = SlabGrid::collective_new(rt, grid, overlap_path)?;
        // Every PE checks beta, so that a bad one is an error everywhere.
        let solver = Reciprocal::new(grid, beta, fft.spectrum_z(), fft.spectrum_lines())?;
        let solver = group.my_rank().map(|_| solver);
        let pes = pes_fingerprint(group.members().iter().copied());
        Ok(Pme { group, slab, fft, solver, times: PmeTimes::default(), pes })
    }
}

impl<'rt> Pme<'rt> {
    /// The time per phase so far.
    pub fn times(&self) -> &PmeTimes {
        &self.times
    }

    /// The time per phase, to reset between warm-up and measurement.
    pub fn times_mut(&mut self) -> &mut PmeTimes {
        &mut self.times
    }

    /// The slab grid (after a step, the convolved grid on this rank's planes).
    pub fn slab_grid(&self) -> &SlabGrid<'rt> {
        &self.slab
    }

    /// The FFT.
    pub fn fft(&self) -> &MeshFft<'rt> {
        &self.fft
    }

    /// One mesh step for the atoms this PME rank received (none on PEs that are not PME
    /// ranks): their reciprocal forces, written into `mesh.forces` (the redistribution's own
    /// buffer, from which they go back without a copy), and this rank's share of the energy
    /// and virial (zero on other PEs; the shares sum to the whole:
    /// [`collective_energy`](Self::collective_energy)).
    ///
    /// # Collective
    /// Every PE of the job must call it (the overlap exchanges are over all PEs; PEs outside
    /// the group return at once from the parts that are the group's).
    ///
    /// # Errors
    /// [`Error::Config`] for atoms on a PE that is not a PME rank, or forces that are not one
    /// per atom; [`Error::Comm`] when communication fails.
    ///
    /// A step's [`Step::mesh`](crate::Step::mesh) over this mesh's PME ranks carries the
    /// redistribution's vote on the step's error: the forward transposes take every PME
    /// rank's ballot to every other, and the redistribution sends no message of its own for
    /// it. A mesh over other PEs leaves the vote to the redistribution, which then holds it at
    /// the return.
    pub fn collective_step(&mut self, mesh: Mesh<'_>) -> Result<PmeEnergy> {
        self.step(mesh, true)
    }

    /// [`collective_step`](Self::collective_step) without the energy and virial: the forces
    /// alone, for the steps between two an engine takes its energies on (GROMACS's
    /// `nstcalcenergy`). It skips the solve's sums: on a 48³ grid over two PME ranks the
    /// solve took 9 µs per step this way, 60 µs with energy and virial.
    ///
    /// # Collective
    /// As [`collective_step`](Self::collective_step).
    ///
    /// # Errors
    /// As [`collective_step`](Self::collective_step).
    pub fn collective_forces(&mut self, mesh: Mesh<'_>) -> Result<()> {
        self.step(mesh, false).map(drop)
    }

    fn step(&mut self, mesh: Mesh<'_>, energies: bool) -> Result<PmeEnergy> {
        let Mesh { atoms: particles, forces, vote } = mesh;
        let vote = vote.filter(|vote| vote.pes == self.pes);
        let is_member = self.group.my_rank().is_some();
        let me = self.group.runtime().my_pe();
        if !is_member && !particles.is_empty() {
            return Err(Error::Config(format!(
                "PE {me} is not a PME rank but was given {} particles for the PME mesh",
                particles.len()
            )));
        }
        if forces.len() != particles.len() {
            return Err(Error::Config(format!(
                "PE {me} gives the PME mesh {} forces for {} particles: one force per particle",
                forces.len(),
                particles.len()
            )));
        }
        let start = Instant::now();
        self.slab.spread(particles);
        self.slab.collective_reduce_overlap()?;
        let spread = start.elapsed();
        let mut energy = PmeEnergy::default();
        if let Some(solver) = &self.solver {
            let start = Instant::now();
            let comm_before = self.fft.transpose_time();
            // The redistribution's vote on the step's error rides in the transposes.
            let ballot = vote.as_ref().map_or(u64::MAX, |vote| vote.ballot);
            let agreed = self.fft.forward_voting(self.slab.slab(), ballot)?;
            if let Some(vote) = vote {
                *vote.agreed = Some(agreed);
            }
            let forward = start.elapsed();
            let start = Instant::now();
            if energies {
                energy = solver.solve(self.fft.spectrum_mut())?;
            } else {
                solver.convolve(self.fft.spectrum_mut())?;
            }
            self.times.solve += start.elapsed();
            let start = Instant::now();
            self.fft.backward(self.slab.slab_mut())?;
            let comm = self.fft.transpose_time() - comm_before;
            self.times.fft += forward + start.elapsed() - comm;
            self.times.fft_comm += comm;
        }
        let start = Instant::now();
        self.slab.collective_return_overlap()?;
        self.slab.gather_into(particles, forces);
        self.times.gather += start.elapsed();
        self.times.spread += spread;
        self.times.steps += 1;
        Ok(energy)
    }

    /// The reciprocal energy and virial: the sums of every PME rank's shares, in rank order,
    /// so the same bits on every PE and every path.
    ///
    /// # Collective
    /// Every PE of the job must call it, each with the share its step returned (zero on PEs
    /// that are not PME ranks).
    ///
    /// # Errors
    /// Never at present; the result type leaves room for a reduction that can fail.
    pub fn collective_energy(&self, share: PmeEnergy) -> Result<PmeEnergy> {
        let rt = self.group.runtime();
        // Energy, then the virial's upper triangle: xx, xy, xz, yy, yz, zz.
        const TERMS: usize = 7;
        let v = &share.virial;
        let mine = [share.energy, v[0][0], v[0][1], v[0][2], v[1][1], v[1][2], v[2][2]];
        let mut total = [0.0f64; TERMS];
        // The PME ranks gather their shares among themselves (O(PME ranks)) and sum them in
        // rank order; the first of them gives every PE the sums.
        if let Some(comm) = self.group.communicator() {
            let mut shares = vec![0.0f64; TERMS * self.group.len()];
            watch("MPI_Allgather (PME energy)", None, || comm.all_gather_into(&mine[..], &mut shares[..]));
            for rank in shares.chunks_exact(TERMS) {
                for (t, &s) in total.iter_mut().zip(rank) {
                    *t += s;
                }
            }
        }
        let first = self.group.members()[0];
        watch("MPI_Bcast (PME energy)", Some(first), || {
            rt.world().process_at_rank(first as i32).broadcast_into(&mut total[..])
        });
        let [energy, xx, xy, xz, yy, yz, zz] = total;
        Ok(PmeEnergy { energy, virial: [[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]] })
    }
}

impl std::fmt::Debug for Pme<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pme")
            .field("group", &self.group)
            .field("slab", &self.slab)
            .field("fft", &self.fft)
            .field("times", &self.times)
            .finish_non_exhaustive()
    }
}
