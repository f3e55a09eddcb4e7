//! What both subsystems share, on the ground floor: an atom as it travels to the PME mesh
//! ([`Particle`]), and a PME rank's share of a step as the redistribution hands it to the mesh
//! ([`Mesh`]): the atoms, the forces the mesh writes for them, and the error vote of the step
//! that the mesh's transposes carry.

use std::fmt;

/// A position, force or box vector: x, y and z, in nm (positions, box vectors) or
/// kJ mol⁻¹ nm⁻¹ (forces), single precision as GROMACS's `rvec`.
pub type RVec = [f32; 3];

/// An atom as it travels to its PME rank.
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Zeroable, bytemuck::Pod)]
#[repr(C)]
pub struct Particle {
    /// Position in nm.
    pub x: RVec,
    /// Charge in e.
    pub q: f32,
    /// Global index.
    pub global: u32,
}

/// A PME rank's share of one step: the atoms it received, by source PE, and the forces on
/// them, in the redistribution's own buffers (empty on PEs that are not PME ranks).
pub struct Mesh<'a> {
    /// The atoms, by source PE, each source's in the order it sent them (its home order; with
    /// a relay, the order the source received them in).
    pub atoms: &'a [Particle],
    /// One force per atom, for the mesh's gather to write
    /// ([`SlabGrid::gather_into`](crate::SlabGrid::gather_into)): on the one-sided paths the
    /// PEs read them where they lie and unpack them into home order in the same pass, with no
    /// staging copy. What they hold before they are written is unspecified (left from the
    /// last step, or on an MPI relay other buffers' bytes).
    pub forces: &'a mut [RVec],
    /// This PME rank's part in the redistribution's vote on the step's error, which the
    /// mesh's forward transposes carry (`None` for a mesh's share made by [`Mesh::new`]).
    pub(crate) vote: Option<Vote<'a>>,
}

impl<'a> Mesh<'a> {
    /// A mesh's share of atoms and their forces with no vote to carry.
    pub fn new(atoms: &'a [Particle], forces: &'a mut [RVec]) -> Mesh<'a> {
        Mesh { atoms, forces, vote: None }
    }
}

/// A PME rank's part in the vote on a step's error, carried by the mesh's forward FFT
/// transposes ([`Pme::collective_step`](crate::Pme::collective_step)): its ballot in (the
/// smallest error marker it knows of in the step, or `u64::MAX`), the smallest of every PME
/// rank's out, for the redistribution, which then needs no vote of its own.
#[derive(Debug)]
pub(crate) struct Vote<'a> {
    pub(crate) ballot: u64,
    /// The PME ranks' PEs ([`pes_fingerprint`]): only a mesh over the same PEs carries it.
    pub(crate) pes: u64,
    pub(crate) agreed: &'a mut Option<u64>,
}

/// A fingerprint of a list of PEs, to tell a mesh over the redistribution's PME ranks from
/// one over others.
pub(crate) fn pes_fingerprint(pes: impl IntoIterator<Item = usize>) -> u64 {
    onesided::Fnv1a::new().words(pes.into_iter().map(|pe| pe as u64)).finish()
}

impl fmt::Debug for Mesh<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mesh").field("atoms", &self.atoms.len()).finish_non_exhaustive()
    }
}
