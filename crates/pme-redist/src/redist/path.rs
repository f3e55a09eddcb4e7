//! The paths a redistribution can take ([`RedistPath`]), per class of link
//! ([`RedistLinks`]), and how `auto` settles them from the job's links.

use std::fmt;
use std::str::FromStr;

use onesided::{Runtime, Transport};

use crate::error::{Error, Result};

/// Which transport a [`Redistribution`](super::Redistribution) uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RedistPath {
    /// One-sided, receivers get from the senders' buffers.
    OneSidedGet,
    /// One-sided, senders put where the receivers announced.
    OneSidedPut,
    /// MPI point to point between partners: `Isend`, `Mprobe` and `Mrecv`.
    Mpi,
    /// MPI `Alltoall` and `Alltoallv` over every rank: the reference.
    MpiAlltoallv,
    /// MPI `Neighbor_alltoall` and `Neighbor_alltoallv` on distributed graphs of the
    /// partners.
    MpiNeighbor,
    /// Per pair of PEs, the path its link class was measured or set fastest on
    /// ([`Runtime::collective_links`], [`RedistPath::collective_links`]):
    /// [`onesided::Transport::Put`] taken as `onesided-put`, `Get` as `onesided-get`,
    /// `Mpi` and `MpiRma` as `mpi`. [`Redistribution::links`](super::Redistribution::links)
    /// says what it took.
    Auto,
}

impl RedistPath {
    /// Every path, in the order reports list them.
    pub const ALL: [RedistPath; 5] = [
        RedistPath::OneSidedGet,
        RedistPath::OneSidedPut,
        RedistPath::Mpi,
        RedistPath::MpiAlltoallv,
        RedistPath::MpiNeighbor,
    ];

    /// The name used on command lines and in benchmark ids.
    pub fn name(self) -> &'static str {
        match self {
            RedistPath::OneSidedGet => "onesided-get",
            RedistPath::OneSidedPut => "onesided-put",
            RedistPath::Mpi => "mpi",
            RedistPath::MpiAlltoallv => "mpi-alltoallv",
            RedistPath::MpiNeighbor => "mpi-neighbor",
            RedistPath::Auto => "auto",
        }
    }

    /// [`Auto`](Self::Auto) made one path for every pair: that of the job's slowest link
    /// class (the links to other nodes when the job spans nodes, else this node's). Other
    /// paths stay as they are.
    ///
    /// # Collective
    /// Every PE calls it alike (the first call settles the links, [`Runtime::collective_links`]).
    ///
    /// # Errors
    /// What settling the links reports (a bad `ONESIDED_TRANSPORT`, or the calibration's
    /// communication).
    pub fn collective_resolve(self, rt: &Runtime) -> Result<RedistPath> {
        let links = self.collective_links(rt)?;
        Ok(if spans_nodes(rt) { links.other_node } else { links.same_node })
    }

    /// The paths a redistribution on this path takes per link class: [`Auto`](Self::Auto)'s
    /// from the job's links, any other path for both classes. Under `Auto`, when the job
    /// spans nodes and one class took MPI and the other a one-sided path, each class keeps
    /// its own; two different one-sided paths (which one redistribution cannot mix) give every
    /// pair the other-node class's.
    ///
    /// # Collective
    /// Every PE calls it alike (the first call settles the links, [`Runtime::collective_links`]).
    ///
    /// # Errors
    /// What settling the links reports (a bad `ONESIDED_TRANSPORT`, or the calibration's
    /// communication).
    pub fn collective_links(self, rt: &Runtime) -> Result<RedistLinks> {
        if self != RedistPath::Auto {
            return Ok(RedistLinks::uniform(self));
        }
        let links = rt.collective_links()?;
        let (same_node, other_node) = (RedistPath::of(links.same_node), RedistPath::of(links.other_node));
        Ok(if !spans_nodes(rt) {
            RedistLinks::uniform(same_node)
        } else if (same_node == RedistPath::Mpi) != (other_node == RedistPath::Mpi) {
            RedistLinks { same_node, other_node }
        } else {
            RedistLinks::uniform(other_node)
        })
    }

    /// The redistribution's path for an exchange's: the redistribution has no MPI one-sided
    /// transport, so where MPI's one-sided path beat OpenSHMEM's on a link, MPI's two-sided
    /// one takes it.
    fn of(transport: Transport) -> RedistPath {
        match transport {
            Transport::Get => RedistPath::OneSidedGet,
            Transport::Mpi | Transport::MpiRma => RedistPath::Mpi,
            _ => RedistPath::OneSidedPut,
        }
    }
}

/// Whether the job runs on two nodes or more: then every node holds fewer than all the PEs.
fn spans_nodes(rt: &Runtime) -> bool {
    rt.node_pes().len() < rt.n_pes()
}

/// The paths of a [`Redistribution`](super::Redistribution) per class of link
/// ([`Runtime::same_node`]): one for the pairs of PEs on one node, one for the pairs across
/// nodes. Either both the same path, or one of them [`RedistPath::Mpi`] and the other
/// [`RedistPath::OneSidedPut`] or [`RedistPath::OneSidedGet`]; then each pair goes by its
/// class's, in the same step ([`RedistBuilder::links`](super::RedistBuilder::links)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RedistLinks {
    /// The path between PEs of one node.
    pub same_node: RedistPath,
    /// The path between PEs of different nodes.
    pub other_node: RedistPath,
}

impl RedistLinks {
    /// The same path for every pair.
    pub fn uniform(path: RedistPath) -> RedistLinks {
        RedistLinks { same_node: path, other_node: path }
    }

    /// Whether both classes take the same path.
    pub fn is_uniform(&self) -> bool {
        self.same_node == self.other_node
    }

    /// `Err` naming what one redistribution cannot take.
    pub(super) fn check(&self) -> Result<()> {
        if self.is_uniform() {
            return Ok(());
        }
        let one_sided = |p: RedistPath| matches!(p, RedistPath::OneSidedGet | RedistPath::OneSidedPut);
        let mixes = (self.same_node == RedistPath::Mpi && one_sided(self.other_node))
            || (self.other_node == RedistPath::Mpi && one_sided(self.same_node));
        if mixes {
            Ok(())
        } else {
            Err(Error::Config(format!(
                "a redistribution cannot take links {self}: one class may take mpi and the other                  onesided-put or onesided-get, or both the same path"
            )))
        }
    }

    /// The path whose buffers serve both classes: the one-sided one where they differ.
    pub(super) fn storage(&self) -> RedistPath {
        if self.same_node == RedistPath::Mpi { self.other_node } else { self.same_node }
    }

    /// A number for the links (below 64), the same on every PE that has the same links.
    pub(super) fn code(&self) -> u64 {
        let index = |p: RedistPath| {
            RedistPath::ALL.iter().chain([&RedistPath::Auto]).position(|&q| q == p).unwrap_or(0) as u64
        };
        8 * index(self.same_node) + index(self.other_node)
    }
}

impl fmt::Display for RedistLinks {
    /// The path, or `same-node=PATH,other-node=PATH` where they differ.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_uniform() {
            write!(f, "{}", self.same_node)
        } else {
            write!(f, "same-node={},other-node={}", self.same_node, self.other_node)
        }
    }
}

impl FromStr for RedistLinks {
    type Err = Error;

    /// One path for every pair (`onesided-put`, `mpi`, ..., `auto`), or
    /// `same-node=PATH,other-node=PATH`.
    fn from_str(s: &str) -> Result<RedistLinks> {
        let Some((first, second)) = s.split_once(',') else {
            return Ok(RedistLinks::uniform(s.trim().parse()?));
        };
        let mut links = RedistLinks::uniform(RedistPath::Auto);
        for part in [first, second] {
            match part.trim().split_once('=') {
                Some(("same-node", path)) => links.same_node = path.trim().parse()?,
                Some(("other-node", path)) => links.other_node = path.trim().parse()?,
                _ => {
                    return Err(Error::Config(format!(
                        "{part:?} in redistribution links {s:?}: expected same-node=PATH,other-node=PATH"
                    )));
                }
            }
        }
        if links.same_node == RedistPath::Auto || links.other_node == RedistPath::Auto {
            return Err(Error::Config(format!(
                "redistribution links {s:?} name auto for one class: auto chooses for both, alone"
            )));
        }
        links.check()?;
        Ok(links)
    }
}

impl fmt::Display for RedistPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for RedistPath {
    type Err = Error;

    fn from_str(s: &str) -> Result<RedistPath> {
        RedistPath::ALL.into_iter().chain([RedistPath::Auto]).find(|p| p.name() == s).ok_or_else(|| {
            Error::Config(format!(
                "unknown redistribution path {s:?}: expected onesided-get, onesided-put, mpi, mpi-alltoallv, \
                 mpi-neighbor or auto"
            ))
        })
    }
}
