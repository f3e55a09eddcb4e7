//! The exchange's builder: the partners agreed, a [`Path::Auto`] exchange's links settled
//! (the runtime's, calibrated at the first, or those given), then the exchange built on them.

use std::marker::PhantomData;

use bytemuck::Pod;

use super::exchange::Exchange;
use super::partners::Partners;
use crate::error::Result;
use crate::links::Links;
use crate::path::{Path, Transport};
use crate::runtime::Runtime;

/// The choices an [`Exchange`] is built with ([`Exchange::builder`]): its path (one-sided by
/// default), or links that pin a transport per class of link; and its partners (by default
/// every PE).
#[derive(Clone, Debug)]
#[must_use = "a builder builds nothing until collective_build"]
pub struct ExchangeBuilder<'rt, T> {
    rt: &'rt Runtime,
    name: String,
    path: Path,
    links: Option<Links>,
    transport: Option<Transport>,
    partners: Option<Vec<usize>>,
    elements: PhantomData<fn() -> T>,
}

impl<'rt, T: Pod> Exchange<'rt, T> {
    /// Starts building an exchange named `name` (errors and reports use the name), on
    /// [`Path::OneSided`] with every PE unless the builder says otherwise:
    ///
    /// ```no_run
    /// # fn main() -> onesided::Result<()> {
    /// use onesided::{Exchange, Path, Runtime};
    ///
    /// let rt = Runtime::init()?;
    /// let (me, n) = (rt.my_pe(), rt.n_pes());
    /// let ring: Exchange<'_, u64> = Exchange::builder(&rt, "ring")
    ///     .path(Path::Mpi)
    ///     .partners(&[(me + n - 1) % n, (me + 1) % n])
    ///     .collective_build()?;
    /// # let _ = ring;
    /// # Ok(())
    /// # }
    /// ```
    pub fn builder(rt: &'rt Runtime, name: &str) -> ExchangeBuilder<'rt, T> {
        ExchangeBuilder {
            rt,
            name: name.to_string(),
            path: Path::OneSided,
            links: None,
            transport: None,
            partners: None,
            elements: PhantomData,
        }
    }
}

impl<'rt, T: Pod> ExchangeBuilder<'rt, T> {
    /// The path: [`Path::OneSided`] (the offset swap's puts, the default), [`Path::Mpi`], or
    /// [`Path::Auto`] (per partner, the transport of its link: the runtime's
    /// [`collective_links`](Runtime::collective_links)).
    pub fn path(self, path: Path) -> Self {
        ExchangeBuilder { path, links: None, transport: None, ..self }
    }

    /// The transport to each class of partner given, per size of message where `links` says
    /// so, rather than the runtime's: for benchmarks and tests of one transport, and for an
    /// exchange whose links derive from another's (the halo pulls its forces where it puts
    /// its coordinates). The exchange's path is then [`Path::Auto`].
    pub fn links(self, links: Links) -> Self {
        ExchangeBuilder { path: Path::Auto, links: Some(links), transport: None, ..self }
    }

    /// One transport for every partner and size, the buffered baseline included: for
    /// benchmarks and tests of each (the exchange's path is then [`Path::Auto`]). Unlike
    /// [`links`](Self::links), nothing is agreed at the build: every PE must pass the same.
    pub fn transport(self, transport: Transport) -> Self {
        ExchangeBuilder { path: Path::Auto, links: None, transport: Some(transport), ..self }
    }

    /// The PEs this PE sends to or receives from (in any order; repeats are ignored): the
    /// exchange's symmetric memory then grows with the largest number of partners any PE
    /// names, not with the PE count. On the put path an exchange with two partners (a halo
    /// pulse's neighbours) holds 1 KiB per PE whatever the job's size, one with every PE
    /// about 512 bytes per PE of the job. Partnership must be mutual: when PE `p` names `q`,
    /// `q` names `p`.
    pub fn partners(self, partners: &[usize]) -> Self {
        ExchangeBuilder { partners: Some(partners.to_vec()), ..self }
    }

    /// Builds the exchange.
    ///
    /// # Collective
    /// Every PE must build it, with the same path or links, in the same order.
    ///
    /// # Errors
    /// On every PE: [`Error::Exchange`](crate::Error::Exchange) for a partner that is not a
    /// PE ([`NoSuchPartner`](crate::ExchangeProblem::NoSuchPartner)), or when some PE names a
    /// partner that does not name it back ([`NotMutual`](crate::ExchangeProblem::NotMutual));
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for elements of zero size or
    /// links that cannot serve; [`Error::CollectiveArgument`](crate::Error::CollectiveArgument)
    /// when the PEs pass different links; what settling the runtime's links reports.
    pub fn collective_build(self) -> Result<Exchange<'rt, T>> {
        let ExchangeBuilder { rt, name, path, links, transport, partners, .. } = self;
        let partners = match partners {
            Some(list) => Partners::collective_listed(rt, &name, &list)?,
            None => Partners { me: rt.my_pe(), listed: None, capacity: rt.n_pes() },
        };
        let links = match (transport.or(Transport::of(path)), links) {
            (Some(transport), _) => Links::uniform(transport),
            (None, Some(links)) => {
                rt.collective_agree_links(&links, &format!("exchange '{name}'"))?;
                links
            }
            (None, None) => rt.collective_links()?,
        };
        Exchange::collective_on(rt, &name, path, links, partners)
    }
}
