//! The public constructors: the partners agreed, an [`ExchangePath::Auto`] exchange's links
//! settled (the runtime's, calibrated at the first, or those given), then the exchange built
//! on them.

use bytemuck::Pod;

use super::exchange::Exchange;
use super::partners::Partners;
use crate::error::Result;
use crate::links::{Links, SizedLinks};
use crate::path::ExchangePath;
use crate::runtime::Runtime;

impl<'rt, T: Pod> Exchange<'rt, T> {
    /// Creates a channel on `path` between any PEs: its slots and signals grow with the PE
    /// count (about 512 bytes of symmetric memory per PE). An exchange whose partners are
    /// known, as a halo pulse's are, should name them:
    /// [`collective_with_partners`](Self::collective_with_partners).
    ///
    /// # Collective
    /// Every PE must create it, with the same path, in the same order.
    pub fn collective_new(rt: &'rt Runtime, name: &str, path: ExchangePath) -> Result<Self> {
        let partners = Partners { me: rt.my_pe(), listed: None, capacity: rt.n_pes() };
        Self::collective_build(rt, name, path, None, partners)
    }

    /// Builds the exchange on `path`, or for `Auto` on `links` where given, else on the
    /// runtime's links.
    fn collective_build(
        rt: &'rt Runtime,
        name: &str,
        path: ExchangePath,
        links: Option<SizedLinks>,
        partners: Partners,
    ) -> Result<Self> {
        let (path, sized) = match (path, links) {
            // Links given that agree, and do not change with the size, are that one path.
            (ExchangePath::Auto, Some(sized)) => {
                rt.collective_agree_links(&sized, &format!("exchange '{name}'"))?;
                let one = sized.links.is_uniform() && !sized.varies();
                (if one { sized.links.same_node } else { ExchangePath::Auto }, sized)
            }
            (ExchangePath::Auto, None) => (ExchangePath::Auto, rt.collective_sized_links()?),
            (path, _) => (path, Links::uniform(path).into()),
        };
        Self::collective_on(rt, name, path, sized, partners)
    }

    /// Creates a channel on `path` between this PE and `partners` only (the PEs it will send
    /// to or receive from, in any order; repeats are ignored): its symmetric memory grows with
    /// the largest number of partners any PE names, not with the PE count. Partnership must
    /// be mutual: when PE `p` names `q`, `q` names `p`.
    ///
    /// # Collective
    /// Every PE must create it, with the same path, in the same order.
    ///
    /// # Errors
    /// On every PE: [`Error::Exchange`] for a partner that is not a PE
    /// ([`NoSuchPartner`](ExchangeProblem::NoSuchPartner)), or when some PE names a partner
    /// that does not name it back ([`NotMutual`](ExchangeProblem::NotMutual)).
    pub fn collective_with_partners(
        rt: &'rt Runtime,
        name: &str,
        path: ExchangePath,
        partners: &[usize],
    ) -> Result<Self> {
        Self::collective_listed(rt, name, path, None, partners)
    }

    /// As [`collective_with_partners`](Self::collective_with_partners), with the path to
    /// each class of partner given ([`Links`](crate::Links), or [`SizedLinks`] with paths
    /// per size of message) rather than the runtime's: how a user of
    /// several exchanges derives the links of some from the others' (the halo pulls its
    /// forces where it puts its coordinates).
    ///
    /// # Collective
    /// Every PE must create it, with the same links, in the same order.
    ///
    /// # Errors
    /// As [`collective_with_partners`](Self::collective_with_partners); on every PE,
    /// [`Error::InvalidArgument`] for a link on the buffered or `Auto` path and
    /// [`Error::CollectiveArgument`] when the PEs pass different links.
    pub fn collective_with_links(
        rt: &'rt Runtime,
        name: &str,
        links: impl Into<SizedLinks>,
        partners: &[usize],
    ) -> Result<Self> {
        Self::collective_listed(rt, name, ExchangePath::Auto, Some(links.into()), partners)
    }

    fn collective_listed(
        rt: &'rt Runtime,
        name: &str,
        path: ExchangePath,
        links: Option<SizedLinks>,
        partners: &[usize],
    ) -> Result<Self> {
        let partners = Partners::collective_listed(rt, name, partners)?;
        Self::collective_build(rt, name, path, links, partners)
    }
}
