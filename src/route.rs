//! The ways the suite builds a redistribution, by the names its programs, tests and benchmark
//! ids use: `onesided-put`, `onesided-get`, `mpi`, the baselines `mpi-alltoallv` and
//! `mpi-neighbor`, `auto`, or a transport per class of link
//! (`same-node=onesided-put,other-node=mpi`).

use std::fmt;
use std::str::FromStr;

use onesided::{Links, Path, Transport};
use pme_redist::{RedistBaseline, RedistBuilder};

/// One way to build a [`pme_redist::Redistribution`].
#[derive(Clone, Debug, PartialEq)]
pub enum Route {
    /// A transport per class of link ([`RedistBuilder::links`]).
    Links(Links),
    /// [`Path::Auto`]: the transports the job's links took.
    Auto,
    /// One of MPI's collective baselines ([`RedistBuilder::baseline`]).
    Baseline(RedistBaseline),
}

impl Route {
    /// One transport for every pair.
    pub fn uniform(transport: Transport) -> Route {
        Route::Links(Links::uniform(transport))
    }

    /// `same_node` between PEs of one node, `other_node` across nodes.
    pub fn mixed(same_node: Transport, other_node: Transport) -> Route {
        Route::Links(Links::new(same_node, other_node))
    }

    /// Every route that takes one protocol for every pair, in the order reports list them:
    /// `onesided-get`, `onesided-put`, `mpi`, `mpi-alltoallv`, `mpi-neighbor`.
    pub fn all() -> Vec<Route> {
        let mut all: Vec<Route> =
            [Transport::Get, Transport::Put, Transport::Mpi].into_iter().map(Route::uniform).collect();
        all.extend(RedistBaseline::ALL.map(Route::Baseline));
        all
    }

    /// The builder, on this route.
    pub fn apply<'rt>(&self, builder: RedistBuilder<'rt>) -> RedistBuilder<'rt> {
        match self {
            Route::Links(links) => builder.links(links.clone()),
            Route::Auto => builder.path(Path::Auto),
            Route::Baseline(baseline) => builder.baseline(*baseline),
        }
    }

    /// Whether every pair goes by MPI (every buffer is then the PE's own).
    pub fn is_mpi(&self) -> bool {
        match self {
            Route::Links(links) => links.same_node == Transport::Mpi && links.other_node == Transport::Mpi,
            Route::Auto => false,
            Route::Baseline(_) => true,
        }
    }

    /// Whether every pair goes one-sided.
    pub fn is_one_sided(&self) -> bool {
        let one_sided = |t: Transport| matches!(t, Transport::Put | Transport::Get);
        matches!(self, Route::Links(links) if one_sided(links.same_node) && one_sided(links.other_node))
    }

    /// The path of the mesh beside it, as the programs pair them: MPI with MPI, auto with
    /// auto, otherwise one-sided.
    pub fn mesh_path(&self) -> Path {
        match self {
            Route::Auto => Path::Auto,
            route if route.is_mpi() => Path::Mpi,
            _ => Path::OneSided,
        }
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Route::Links(links) if links.same_node == links.other_node => write!(f, "{}", links.same_node),
            Route::Links(links) => write!(f, "same-node={},other-node={}", links.same_node, links.other_node),
            Route::Auto => f.write_str("auto"),
            Route::Baseline(baseline) => write!(f, "{baseline}"),
        }
    }
}

impl FromStr for Route {
    type Err = String;

    /// `auto`, a baseline's name, or links ([`Links`]'s names: `onesided-put`, `mpi`,
    /// `same-node=onesided-get,other-node=mpi`, ...).
    fn from_str(s: &str) -> Result<Route, String> {
        if s == "auto" {
            return Ok(Route::Auto);
        }
        if let Some(baseline) = RedistBaseline::ALL.into_iter().find(|b| b.name() == s) {
            return Ok(Route::Baseline(baseline));
        }
        s.parse::<Links>().map(Route::Links).map_err(|e| {
            format!(
                "unknown redistribution path {s:?} ({e}): expected onesided-get, onesided-put, mpi, \
                 mpi-alltoallv, mpi-neighbor, auto, or same-node=PATH,other-node=PATH"
            )
        })
    }
}
