//! The transports an exchange's messages take ([`ExchangePath`]): one-sided put or get, MPI
//! two-sided or one-sided, the buffered baseline, or per link what [`Links`](crate::Links) name.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// Which transport an [`Exchange`](crate::Exchange) uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExchangePath {
    /// One-sided offset swap: receivers announce where, senders put straight into place.
    Put,
    /// One-sided pull: senders publish in a symmetric staging buffer, receivers get.
    Get,
    /// One-sided through a symmetric scratch buffer with post/consumed flags (the 2013 first
    /// attempt), kept as a baseline.
    Buffered,
    /// MPI two-sided, the reference.
    Mpi,
    /// MPI-3 one-sided: the put path's offset swap over an MPI window on the symmetric heap
    /// (`MPI_Put`, `MPI_Win_flush`, signals raised by `MPI_Accumulate`, passive target), for
    /// networks where MPI's one-sided transport is faster than OpenSHMEM's.
    MpiRma,
    /// Per partner, the path of its link: one to the PEs of this node and one to the rest,
    /// measured fastest at the first `Auto` exchange, cached, or named by
    /// [`env::TRANSPORT`](crate::env::TRANSPORT) ([`Runtime::collective_links`]).
    Auto,
}

impl ExchangePath {
    /// Every path, in the order reports list them.
    pub const ALL: [ExchangePath; 5] = [
        ExchangePath::Put,
        ExchangePath::Get,
        ExchangePath::Buffered,
        ExchangePath::Mpi,
        ExchangePath::MpiRma,
    ];

    /// The name used on command lines and in benchmark ids.
    pub fn name(self) -> &'static str {
        match self {
            ExchangePath::Put => "onesided-put",
            ExchangePath::Get => "onesided-get",
            ExchangePath::Buffered => "buffered",
            ExchangePath::Mpi => "mpi",
            ExchangePath::MpiRma => "mpi-rma",
            ExchangePath::Auto => "auto",
        }
    }

    /// Whether receivers announce where their messages go before the senders send (the
    /// offset swap: the put path and the MPI one-sided path): there a sender checks the room
    /// and learns of a message too large itself, writes nothing where it would not fit, and
    /// [`Exchange::post_receives`] takes the announcement off the call.
    pub fn announces(self) -> bool {
        matches!(self, ExchangePath::Put | ExchangePath::MpiRma)
    }

    /// Whether the path needs [`Exchange::collective_reserve`] before messages that are not
    /// offered in place are sent (`Auto` may: where a link takes the get path).
    pub fn needs_reserve(self) -> bool {
        matches!(self, ExchangePath::Get | ExchangePath::Buffered | ExchangePath::Auto)
    }
}

impl fmt::Display for ExchangePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ExchangePath {
    type Err = Error;

    fn from_str(s: &str) -> Result<ExchangePath> {
        match s {
            "onesided-put" | "put" | "onesided" => Ok(ExchangePath::Put),
            "onesided-get" | "get" => Ok(ExchangePath::Get),
            "buffered" => Ok(ExchangePath::Buffered),
            "mpi" => Ok(ExchangePath::Mpi),
            "mpi-rma" | "rma" => Ok(ExchangePath::MpiRma),
            "auto" => Ok(ExchangePath::Auto),
            other => Err(Error::InvalidArgument(format!(
                "unknown send-receive path {other:?}: expected onesided-put, onesided-get, \
                 buffered, mpi, mpi-rma or auto"
            ))),
        }
    }
}
