//! The wires a redistribution runs on ([`Wire`]), per class of link ([`Wires`]), and how the
//! engine's choice ([`Path`], [`Links`], or a benchmark's baseline) settles them.

use std::fmt;

use onesided::{Links, Path, Runtime, Transport};

use crate::error::{Error, Result};

/// The protocol of a redistribution's pairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Wire {
    /// One-sided, receivers get from the senders' buffers.
    Get,
    /// One-sided, senders put where the receivers announced.
    Put,
    /// MPI point to point between partners: `Isend`, `Mprobe` and `Mrecv`.
    Mpi,
    /// MPI `Alltoall` and `Alltoallv` over every rank: the reference.
    #[cfg(feature = "baselines")]
    MpiAlltoallv,
    /// MPI `Neighbor_alltoall` and `Neighbor_alltoallv` on distributed graphs of the partners.
    #[cfg(feature = "baselines")]
    MpiNeighbor,
}

impl Wire {
    /// The wire's number in [`Wires::code`].
    fn index(self) -> u64 {
        match self {
            Wire::Get => 0,
            Wire::Put => 1,
            Wire::Mpi => 2,
            #[cfg(feature = "baselines")]
            Wire::MpiAlltoallv => 3,
            #[cfg(feature = "baselines")]
            Wire::MpiNeighbor => 4,
        }
    }

    /// The name in reports, buffer names and benchmark ids.
    pub(super) fn name(self) -> &'static str {
        match self {
            Wire::Get => "onesided-get",
            Wire::Put => "onesided-put",
            Wire::Mpi => "mpi",
            #[cfg(feature = "baselines")]
            Wire::MpiAlltoallv => "mpi-alltoallv",
            #[cfg(feature = "baselines")]
            Wire::MpiNeighbor => "mpi-neighbor",
        }
    }

    /// The transport an engine names for this wire (the baselines are MPI's).
    pub(super) fn transport(self) -> Transport {
        match self {
            Wire::Get => Transport::Get,
            Wire::Put => Transport::Put,
            _ => Transport::Mpi,
        }
    }

    /// Whether it is one-sided.
    pub(super) fn one_sided(self) -> bool {
        matches!(self, Wire::Get | Wire::Put)
    }
}

impl fmt::Display for Wire {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The MPI baselines a benchmark compares the redistribution's paths with
/// ([`RedistBuilder::baseline`](super::RedistBuilder::baseline)), with the `baselines`
/// feature.
#[cfg(feature = "baselines")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RedistBaseline {
    /// `MPI_Alltoall` of the counts and `MPI_Alltoallv` of the data over every rank: the
    /// reference every MD code with PME once used.
    MpiAlltoallv,
    /// `MPI_Neighbor_alltoall` and `MPI_Neighbor_alltoallv` on distributed graphs of the
    /// partners.
    MpiNeighbor,
}

#[cfg(feature = "baselines")]
impl RedistBaseline {
    /// Both, in the order reports list them.
    pub const ALL: [RedistBaseline; 2] = [RedistBaseline::MpiAlltoallv, RedistBaseline::MpiNeighbor];

    /// The name in reports and benchmark ids: `mpi-alltoallv`, `mpi-neighbor`.
    pub fn name(self) -> &'static str {
        self.wire().name()
    }

    pub(super) fn wire(self) -> Wire {
        match self {
            RedistBaseline::MpiAlltoallv => Wire::MpiAlltoallv,
            RedistBaseline::MpiNeighbor => Wire::MpiNeighbor,
        }
    }
}

#[cfg(feature = "baselines")]
impl fmt::Display for RedistBaseline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the engine chose, before the job's links settle [`Path::Auto`].
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Choice {
    Path(Path),
    Links(Links),
    #[cfg(feature = "baselines")]
    Baseline(RedistBaseline),
}

impl Choice {
    /// The wires of a choice that needs no calibration (`None` for [`Path::Auto`]).
    ///
    /// # Errors
    /// [`Error::Config`] for links one redistribution cannot take.
    pub(super) fn fixed(&self) -> Result<Option<Wires>> {
        match self {
            Choice::Path(Path::OneSided) => Ok(Some(Wires::uniform(Wire::Put))),
            Choice::Path(Path::Mpi) => Ok(Some(Wires::uniform(Wire::Mpi))),
            Choice::Path(Path::Auto) => Ok(None),
            Choice::Links(links) => {
                let wire = |class: &str, t: Transport| match t {
                    Transport::Put => Ok(Wire::Put),
                    Transport::Get => Ok(Wire::Get),
                    Transport::Mpi => Ok(Wire::Mpi),
                    other => Err(Error::Config(format!(
                        "the redistribution has no {other} transport ({class} in links {links}): \
                         take onesided-put, onesided-get or mpi"
                    ))),
                };
                let wires = Wires {
                    same_node: wire("same-node", links.same_node)?,
                    other_node: wire("other-node", links.other_node)?,
                };
                wires.check()?;
                Ok(Some(wires))
            }
            #[cfg(feature = "baselines")]
            Choice::Baseline(baseline) => Ok(Some(Wires::uniform(baseline.wire()))),
        }
    }

    /// A number for the choice (below 64), the same on every PE that made the same one.
    pub(super) fn code(&self, fixed: Option<Wires>) -> u64 {
        match (self, fixed) {
            (_, Some(wires)) => wires.code(),
            _ => 48,
        }
    }
}

impl fmt::Display for Choice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Choice::Path(path) => write!(f, "{path}"),
            Choice::Links(links) => write!(f, "links {links}"),
            #[cfg(feature = "baselines")]
            Choice::Baseline(baseline) => write!(f, "{baseline}"),
        }
    }
}

/// The wires of [`Path::Auto`]: per class, the transport the job's links took (MPI's
/// one-sided transport, which the redistribution does not have, as MPI's two-sided). When the
/// job spans nodes and one class took MPI and the other a one-sided wire, each class keeps
/// its own; two different one-sided wires (which one redistribution cannot mix) give every
/// pair the other-node class's; on one node, the same-node class's.
///
/// # Collective
/// Every PE calls it alike (the first call settles the links, [`Runtime::collective_links`]).
///
/// # Errors
/// What settling the links reports (a bad `ONESIDED_TRANSPORT`, or the calibration's
/// communication).
pub(super) fn collective_auto(rt: &Runtime) -> Result<Wires> {
    let links = rt.collective_links()?;
    let of = |t: Transport| match t {
        Transport::Get => Wire::Get,
        Transport::Mpi | Transport::MpiRma => Wire::Mpi,
        _ => Wire::Put,
    };
    let (same_node, other_node) = (of(links.same_node), of(links.other_node));
    Ok(if rt.node_pes().len() == rt.n_pes() {
        Wires::uniform(same_node)
    } else if (same_node == Wire::Mpi) != (other_node == Wire::Mpi) {
        Wires { same_node, other_node }
    } else {
        Wires::uniform(other_node)
    })
}

/// The wires of a redistribution per class of link ([`Runtime::same_node`]): both the same,
/// or one of them [`Wire::Mpi`] and the other one-sided; then each pair goes by its class's,
/// in the same step ([`super::mixed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Wires {
    /// The wire between PEs of one node.
    pub same_node: Wire,
    /// The wire between PEs of different nodes.
    pub other_node: Wire,
}

impl Wires {
    /// The same wire for every pair.
    pub fn uniform(wire: Wire) -> Wires {
        Wires { same_node: wire, other_node: wire }
    }

    /// Whether both classes take the same wire.
    pub fn is_uniform(&self) -> bool {
        self.same_node == self.other_node
    }

    /// `Err` naming what one redistribution cannot take.
    fn check(&self) -> Result<()> {
        let mixes = (self.same_node == Wire::Mpi && self.other_node.one_sided())
            || (self.other_node == Wire::Mpi && self.same_node.one_sided());
        if self.is_uniform() || mixes {
            Ok(())
        } else {
            Err(Error::Config(format!(
                "a redistribution cannot take links {self}: one class may take mpi and the other \
                 onesided-put or onesided-get, or both the same transport"
            )))
        }
    }

    /// The wire whose buffers serve both classes: the one-sided one where they differ.
    pub fn storage(&self) -> Wire {
        if self.same_node == Wire::Mpi { self.other_node } else { self.same_node }
    }

    /// A number for the wires (below 48), the same on every PE that has the same wires.
    fn code(&self) -> u64 {
        8 * self.same_node.index() + self.other_node.index()
    }

    /// The links an engine would name for these wires.
    pub fn links(&self) -> Links {
        Links::new(self.same_node.transport(), self.other_node.transport())
    }
}

impl fmt::Display for Wires {
    /// The wire, or `same-node=WIRE,other-node=WIRE` where they differ.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_uniform() {
            write!(f, "{}", self.same_node)
        } else {
            write!(f, "same-node={},other-node={}", self.same_node, self.other_node)
        }
    }
}
