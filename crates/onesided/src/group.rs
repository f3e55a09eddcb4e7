//! PE groups: a subset of the PEs (the PME ranks, say) with translation between a member's
//! rank in the group and its PE number, and an MPI communicator of the same members for the
//! reference paths.
//!
//! On OpenSHMEM 1.5 a group whose members form a strided sequence is also an OpenSHMEM team
//! (`shmem_team_split_strided`), and translation goes through the library
//! (`shmem_team_translate_pe`). Otherwise, and for members in any order, the group keeps its
//! own tables, which is all the library would do for us on 1.4.

use mpi::topology::{Color, Communicator, SimpleCommunicator};

use crate::collective::Collectives;
use crate::error::{Error, Result};
use crate::runtime::Runtime;

/// A subset of the PEs, ranked `0..len()` in the order given at creation.
pub struct PeGroup<'rt> {
    rt: &'rt Runtime,
    name: String,
    /// `members[rank]` is the PE of that rank.
    members: Vec<usize>,
    /// `ranks[pe]` is the rank of that PE, if a member.
    ranks: Vec<Option<usize>>,
    /// The members' communicator, on members only.
    comm: Option<SimpleCommunicator>,
    #[cfg(shmem_spec_1_5)]
    team: Option<team::Team>,
}

impl<'rt> PeGroup<'rt> {
    /// A group of `members` (PE numbers, distinct, in rank order).
    ///
    /// # Collective
    /// Every PE of the job must call it with the same members, in the same order relative to
    /// other collectives; PEs outside the group take part too (the MPI communicator and, on
    /// OpenSHMEM 1.5, the team are split from the world).
    ///
    /// # Errors
    /// On every PE alike: [`Error::CollectiveArgument`] for an empty list, a repeated member, a
    /// PE out of range, or members that differ between PEs.
    pub fn collective_new(rt: &'rt Runtime, name: &str, members: &[usize]) -> Result<Self> {
        let n = rt.n_pes();
        let mut ranks = vec![None; n];
        let mut problem = None;
        if members.is_empty() {
            problem = Some("it has no members".to_string());
        }
        for (rank, &pe) in members.iter().enumerate() {
            match ranks.get_mut(pe) {
                None => {
                    problem.get_or_insert(format!("member PE {pe} does not exist (the job has {n} PEs)"));
                }
                Some(Some(first)) => {
                    problem.get_or_insert(format!("PE {pe} is listed twice (ranks {first} and {rank})"));
                }
                Some(slot) => *slot = Some(rank),
            }
        }
        // Every PE must have passed the same list: compare a digest and its complement.
        let digest = members.iter().fold(members.len() as u64, |h, &pe| {
            (h ^ pe as u64).wrapping_mul(0x100_0000_01b3) & (i64::MAX as u64)
        });
        let mut agreement = [digest, i64::MAX as u64 - digest, u64::from(problem.is_some())];
        rt.max_u64(&mut agreement)?;
        if let Some(problem) = problem {
            return Err(Error::CollectiveArgument(format!("PE group '{name}': {problem}")));
        }
        if agreement[2] > 0 {
            return Err(Error::CollectiveArgument(format!(
                "PE group '{name}': another PE passed an invalid member list"
            )));
        }
        if agreement[0] != i64::MAX as u64 - agreement[1] {
            return Err(Error::CollectiveArgument(format!(
                "PE group '{name}': the PEs passed different member lists; every PE must pass the same"
            )));
        }
        let me = rt.my_pe();
        let color = match ranks[me] {
            Some(_) => Color::with_value(0),
            None => Color::undefined(),
        };
        let key = ranks[me].unwrap_or(0) as i32;
        let comm = crate::watchdog::watch("MPI_Comm_split (a group)", None, || {
            rt.world().split_by_color_with_key(color, key)
        });
        #[cfg(shmem_spec_1_5)]
        let team = team::Team::collective_split(members)?;
        let group = PeGroup {
            rt,
            name: name.to_string(),
            members: members.to_vec(),
            ranks,
            comm,
            #[cfg(shmem_spec_1_5)]
            team,
        };
        debug_assert!(group.comm.as_ref().is_none_or(|c| c.size() as usize == group.members.len()));
        Ok(group)
    }

    /// The part of `parts` this PE belongs to (the rows of a grid of PEs, say): every PE calls
    /// it with the same list of disjoint parts of equal size, and each gets the group of its
    /// own part (a PE in no part gets the first, as a non-member). Collectives over such
    /// groups ([`Alltoall`](crate::Alltoall)) allocate alike on every PE, and each part's
    /// members talk among themselves. The groups have MPI communicators but no OpenSHMEM
    /// team.
    ///
    /// # Collective
    /// Every PE of the job must call it with the same parts.
    ///
    /// # Errors
    /// On every PE alike: [`Error::CollectiveArgument`] for no parts, an empty part, parts of
    /// different sizes, a PE in two parts or out of range, or parts that differ between PEs.
    pub fn collective_split(rt: &'rt Runtime, name: &str, parts: &[Vec<usize>]) -> Result<Self> {
        let n = rt.n_pes();
        let mut part_of = vec![None; n];
        let mut problem = None;
        if parts.is_empty() || parts[0].is_empty() {
            problem = Some("it has no parts, or an empty one".to_string());
        }
        for (i, part) in parts.iter().enumerate() {
            if part.len() != parts[0].len() {
                problem.get_or_insert(format!(
                    "part {i} has {} members and part 0 {}: the parts must be of one size",
                    part.len(),
                    parts[0].len()
                ));
            }
            for &pe in part {
                match part_of.get_mut(pe) {
                    None => {
                        problem.get_or_insert(format!("member PE {pe} does not exist (the job has {n} PEs)"));
                    }
                    Some(Some(first)) => {
                        problem.get_or_insert(format!("PE {pe} is in parts {first} and {i}"));
                    }
                    Some(slot) => *slot = Some(i),
                }
            }
        }
        let digest = parts.iter().flatten().fold(parts.len() as u64, |h, &pe| {
            (h ^ pe as u64).wrapping_mul(0x100_0000_01b3) & (i64::MAX as u64)
        });
        let mut agreement = [digest, i64::MAX as u64 - digest, u64::from(problem.is_some())];
        rt.max_u64(&mut agreement)?;
        if let Some(problem) = problem {
            return Err(Error::CollectiveArgument(format!("PE groups '{name}': {problem}")));
        }
        if agreement[2] > 0 {
            return Err(Error::CollectiveArgument(format!(
                "PE groups '{name}': another PE passed invalid parts"
            )));
        }
        if agreement[0] != i64::MAX as u64 - agreement[1] {
            return Err(Error::CollectiveArgument(format!(
                "PE groups '{name}': the PEs passed different parts; every PE must pass the same"
            )));
        }
        let me = rt.my_pe();
        let mine = part_of[me];
        let members = parts[mine.unwrap_or(0)].clone();
        let mut ranks = vec![None; n];
        for (rank, &pe) in members.iter().enumerate() {
            ranks[pe] = Some(rank);
        }
        let color = match mine {
            Some(i) => Color::with_value(i as i32),
            None => Color::undefined(),
        };
        let key = ranks[me].unwrap_or(0) as i32;
        let comm = crate::watchdog::watch("MPI_Comm_split (a group)", None, || {
            rt.world().split_by_color_with_key(color, key)
        });
        Ok(PeGroup {
            rt,
            name: name.to_string(),
            members,
            ranks,
            comm,
            #[cfg(shmem_spec_1_5)]
            team: None,
        })
    }

    /// Every PE of the job, ranked by PE number.
    ///
    /// # Collective
    /// As [`collective_new`](Self::collective_new).
    pub fn collective_world(rt: &'rt Runtime) -> Result<Self> {
        let all: Vec<usize> = (0..rt.n_pes()).collect();
        Self::collective_new(rt, "world", &all)
    }

    /// The name given at creation.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The runtime.
    pub fn runtime(&self) -> &'rt Runtime {
        self.rt
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Always false: a group has at least one member.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The members' PE numbers, in rank order.
    pub fn members(&self) -> &[usize] {
        &self.members
    }

    /// Whether `pe` is a member.
    pub fn contains(&self, pe: usize) -> bool {
        self.rank_of(pe).is_some()
    }

    /// The rank of `pe` in the group, if it is a member.
    pub fn rank_of(&self, pe: usize) -> Option<usize> {
        #[cfg(shmem_spec_1_5)]
        if let Some(team) = &self.team {
            return team.rank_of(pe);
        }
        self.ranks.get(pe).copied().flatten()
    }

    /// The PE of group rank `rank`.
    pub fn pe_of(&self, rank: usize) -> Result<usize> {
        #[cfg(shmem_spec_1_5)]
        if let (Some(team), true) = (&self.team, rank < self.members.len()) {
            return Ok(team.pe_of(rank));
        }
        self.members.get(rank).copied().ok_or_else(|| {
            Error::InvalidArgument(format!(
                "PE group '{}' has ranks 0..{}, not {rank}",
                self.name,
                self.members.len()
            ))
        })
    }

    /// This PE's rank in the group, if it is a member.
    pub fn my_rank(&self) -> Option<usize> {
        self.ranks[self.rt.my_pe()]
    }

    /// The MPI communicator of the members (ranks equal group ranks), on members only.
    pub fn communicator(&self) -> Option<&SimpleCommunicator> {
        self.comm.as_ref()
    }

    /// Whether the group is backed by an OpenSHMEM team (spec 1.5, strided members).
    pub fn is_team(&self) -> bool {
        #[cfg(shmem_spec_1_5)]
        return self.team.is_some();
        #[cfg(not(shmem_spec_1_5))]
        false
    }

    /// The members as an OpenSHMEM 1.4 active set `(start, log2 stride, size)`, when they
    /// form one (ascending, with a power-of-two stride).
    pub fn active_set(&self) -> Option<(usize, u32, usize)> {
        let start = self.members[0];
        let size = self.members.len();
        let stride = if size > 1 { self.members[1].checked_sub(start)? } else { 1 };
        let strided = self.members.iter().enumerate().all(|(i, &pe)| pe == start + i * stride);
        (strided && stride.is_power_of_two()).then(|| (start, stride.trailing_zeros(), size))
    }
}

#[cfg(shmem_spec_1_5)]
mod team {
    //! OpenSHMEM 1.5 teams for strided groups.

    use crate::error::{Error, Result};

    /// A team created by `shmem_team_split_strided`, destroyed on drop.
    pub(super) struct Team {
        team: shmem_sys::shmem_team_t,
    }

    impl Team {
        /// Splits the world team when `members` form a strided sequence; `None` otherwise,
        /// and on PEs outside the group.
        ///
        /// # Collective
        /// Every PE of the world team calls it with the same members.
        pub(super) fn collective_split(members: &[usize]) -> Result<Option<Team>> {
            let start = members[0];
            let stride = if members.len() > 1 { members[1] as isize - start as isize } else { 1 };
            let strided = stride > 0
                && members
                    .iter()
                    .enumerate()
                    .all(|(i, &pe)| pe as isize == start as isize + i as isize * stride);
            if !strided {
                return Ok(None);
            }
            // SAFETY: reading shim accessors of the library's predefined teams.
            let (world, invalid) =
                unsafe { (shmem_sys::shmem_sys_team_world(), shmem_sys::shmem_sys_team_invalid()) };
            let mut team = invalid;
            // SAFETY: every PE of the world team calls this with the same arguments; a null
            // configuration with mask 0 asks for the defaults.
            let code = crate::watchdog::watch("shmem_team_split_strided", None, || unsafe {
                shmem_sys::shmem_team_split_strided(
                    world,
                    start as i32,
                    stride as i32,
                    members.len() as i32,
                    std::ptr::null(),
                    0,
                    &mut team,
                )
            });
            if code != 0 {
                return Err(Error::InvalidArgument(format!(
                    "shmem_team_split_strided({start}, {stride}, {}) failed with {code}",
                    members.len()
                )));
            }
            // `then`, not `then_some`: a Team made for a PE outside the group (the invalid
            // team) would be dropped at once, destroying the invalid team.
            Ok((team != invalid).then(|| Team { team }))
        }

        pub(super) fn rank_of(&self, pe: usize) -> Option<usize> {
            // SAFETY: the team is valid; translating from the world team is always allowed.
            let rank = unsafe {
                shmem_sys::shmem_team_translate_pe(shmem_sys::shmem_sys_team_world(), pe as i32, self.team)
            };
            usize::try_from(rank).ok()
        }

        pub(super) fn pe_of(&self, rank: usize) -> usize {
            // SAFETY: the team is valid and rank is below its size (checked by the caller).
            let pe = unsafe {
                shmem_sys::shmem_team_translate_pe(self.team, rank as i32, shmem_sys::shmem_sys_team_world())
            };
            pe as usize
        }
    }

    impl Drop for Team {
        fn drop(&mut self) {
            // SAFETY: the team is valid and destroyed once; every member drops its group.
            let team = self.team;
            // SAFETY: as above.
            let outcome = crate::watchdog::watch("shmem_team_destroy", None, || unsafe {
                shmem_sys::shmem_team_destroy(team)
            })
            .failure();
            if let Some(code) = outcome {
                // Drop cannot return it; a failure means the library no longer knew the team.
                crate::launch::say(&format!(
                    "onesided: shmem_team_destroy failed with {code}; the team was not released"
                ));
            }
        }
    }

    /// What `shmem_team_destroy` returns: nothing in the specification, an error code in Sandia
    /// OpenSHMEM.
    trait DestroyOutcome {
        /// The error code, if the call failed.
        fn failure(self) -> Option<std::ffi::c_int>;
    }

    impl DestroyOutcome for () {
        fn failure(self) -> Option<std::ffi::c_int> {
            None
        }
    }

    impl DestroyOutcome for std::ffi::c_int {
        fn failure(self) -> Option<std::ffi::c_int> {
            (self != 0).then_some(self)
        }
    }
}

impl std::fmt::Debug for PeGroup<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeGroup")
            .field("name", &self.name)
            .field("members", &self.members)
            .field("my_rank", &self.my_rank())
            .finish_non_exhaustive()
    }
}
