//! The plan: which atoms each pulse sends and where received atoms land, built from the
//! reference fractions at (re)partition; the per-atom fields that travel along it; and one
//! pulse of `move_x`.
//!
//! GROMACS's scheme with the half-shell convention, in fractional coordinates: dimension by
//! dimension (in the grid's [exchange order]: split dimensions in x, y, z order, then those of
//! one domain, whose pulses only make periodic images), each domain receives from its
//! neighbour above the atoms within the halo range beyond its upper face, and sends to its
//! neighbour below the atoms within that range above its own lower face (on a staggered grid,
//! above the lower face the atom's zone needs: [`DdGrid::send_limits`]). Atoms received in
//! earlier dimensions are forwarded in later ones, which covers edges and corners; when the
//! range exceeds a domain's width, a second pulse forwards the atoms received in the first,
//! one domain further. An atom sent across the periodic boundary (from the first domain of a
//! dimension to the last) is shifted by that dimension's box vector on the way. Received atoms
//! land in place, behind the home atoms, in one symmetric coordinate array. Once per plan each
//! pulse also sends, for every atom on its list, the global index, the reference fractions
//! (with the image shifts) and the zone ([`HaloRecord`]).
//!
//! [exchange order]: crate::DdGrid::exchange_order
//! [`DdGrid::send_limits`]: crate::DdGrid::send_limits

use std::mem::size_of;

use bytemuck::Pod;
use onesided::{Agreement, Incoming, Outgoing};
use rayon::prelude::*;

use super::agree::check_count;
use super::exchange::HaloExchange;
use super::schedule::{PulseShape, Schedule};
use super::step::parallel;
use crate::error::{Error, Result};
use crate::real::Real;
use crate::zone::sends;
use crate::zone::{PeriodicImage, Zone};

/// What the plan sends about each halo atom once: its global index, its zone on the sender
/// (the dimensions it arrived along, which with the one it is sent along decide pair
/// ownership) and the fractions of its position (with the image shifts).
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Zeroable, bytemuck::Pod)]
#[repr(C)]
pub(super) struct HaloRecord {
    global: u32,
    zone: u8,
    padding: [u8; 3],
    fraction: [f64; 3],
}

impl<'rt, R: Real> HaloExchange<'rt, R> {
    /// Sends a per-atom field of the home atoms (`home[i]` for home atom `i`: charges, type
    /// ids, any plain-old-data value) along the current plan, and returns it for every local
    /// atom, in the order of [`coordinates`](Self::coordinates).
    ///
    /// # Collective
    /// Every PE must call it, with a field of the same type.
    ///
    /// # Errors
    /// [`Error::CollectiveConfig`] on every PE when some PE passes a field whose length is not its home
    /// atom count.
    pub fn collective_spread<T: Pod>(&mut self, home: &[T]) -> Result<Vec<T>> {
        self.usable()?;
        let outcome = self.spread(home);
        self.note(outcome)
    }

    pub(super) fn spread<T: Pod>(&mut self, home: &[T]) -> Result<Vec<T>> {
        let width = size_of::<T>() as u64;
        let mut agreement = Agreement::new();
        let widths = agreement.extent(width);
        let short = agreement.lowest_pe(home.len() != self.n_home);
        let agreed = agreement.collective_run(self.rt)?;
        if let Some(pe) = agreed.get(short) {
            return Err(Error::CollectiveConfig(format!(
                "PE {pe} passes collective_spread a field whose length is not its number of home atoms"
            )));
        }
        let (least, most) = agreed.get(widths);
        if least != most || width == 0 {
            return Err(Error::CollectiveConfig(format!(
                "the PEs pass collective_spread fields of {least} to {most} bytes per atom: every PE \
                 must pass a field of the same type, of nonzero size"
            )));
        }
        let mut values = home.to_vec();
        values.reserve(self.n_local - self.n_home);
        for q in 0..self.pulses.len() {
            let count = self.pulses[q].count;
            self.field_pulse(q, count, &mut values)?;
        }
        Ok(values)
    }

    /// Sends `count` to `to` and returns the count received from `from`.
    pub(super) fn exchange_count(&mut self, to: usize, count: usize, from: usize) -> Result<usize> {
        self.counts
            .call(&[&self.count_buffer])
            .send(&[Outgoing::Copy { to, data: &[count as u64] }])
            .receive(&[Incoming { from, buffer: 0, offset: 0, room: 1 }])
            .run()?;
        Ok(self.count_buffer.get_value(self.rt.my_pe(), 0)? as usize)
    }

    /// Makes the atoms `ids` at (wrapped) `positions` the home atoms.
    pub(super) fn set_home(
        &mut self,
        ids: impl ExactSizeIterator<Item = u32>,
        positions: impl ExactSizeIterator<Item = [R; 3]>,
    ) -> Result<()> {
        let n = ids.len();
        self.coords.collective_ensure(n)?;
        self.ids.clear();
        self.ids.extend(ids);
        let positions: Vec<[R; 3]> = positions.collect();
        self.coords.array().write_local(0, &positions)?;
        self.n_home = n;
        self.n_local = n;
        self.image_table.clear();
        Ok(())
    }

    /// Builds the plan from the current positions: for every pulse, which atoms this PE sends
    /// and how many it receives; the atoms' global indices and fractions travel once, so
    /// every PE knows its halo's indices and reference fractions.
    ///
    /// # Collective
    /// Every PE builds the same sequence of pulses.
    pub(super) fn collective_build_plan(&mut self) -> Result<()> {
        self.n_local = self.n_home;
        self.image_table.clear();
        self.ids.truncate(self.n_home);
        let pbc = *self.grid.pbc();
        self.reference =
            self.coordinates()[..self.n_home].iter().map(|&x| pbc.clamped_fraction_real(x)).collect();
        self.anchors = self.coordinates()[..self.n_home].to_vec();
        // What travels about each local atom, kept in step with ids and reference: each pulse
        // sends the entries of its send list and appends what it receives.
        self.zones.clear();
        self.zones.resize(self.n_home, Zone::HOME);
        let mut records: Vec<HaloRecord> = (0..self.n_home)
            .map(|i| HaloRecord {
                global: self.ids[i],
                zone: 0,
                padding: [0; 3],
                fraction: self.reference[i],
            })
            .collect();
        for q in 0..self.pulses.len() {
            let (dim, first) = (self.pulses[q].dim, q == 0 || self.pulses[q - 1].dim != self.pulses[q].dim);
            // The first pulse of a dimension considers every local atom so far (home and the
            // halos of earlier dimensions); later pulses forward what the previous one brought.
            let candidates = if first {
                0..self.n_local
            } else {
                let previous = &self.pulses[q - 1];
                previous.offset..previous.offset + previous.count
            };
            let limits = self.grid.send_limits(self.cell, dim);
            let send: Vec<u32> = sends(&self.reference, &self.zones, candidates, dim, limits).collect();
            let (to, from) = (self.pulses[q].to, self.pulses[q].from);
            let count = self.exchange_count(to, send.len(), from)?;
            self.coords.collective_ensure(self.n_local + count)?;
            // Where the links differ with the size of message, the pulse takes those of its
            // largest (the same decision on every PE, so the condition is too).
            if self.pulses[q].x.links().varies() {
                self.pulses[q].x.collective_reserve(send.len())?;
            }
            let offset = self.n_local;
            self.pulses[q].send = send;
            self.field_pulse(q, count, &mut records)?;
            let receives_shifted = self.pulses[q].receives_shifted;
            for r in &mut records[offset..] {
                if receives_shifted {
                    r.fraction[dim] += 1.0;
                }
                r.zone = Zone::from_bits(r.zone).received_along(dim).bits();
                self.ids.push(r.global);
                self.reference.push(r.fraction);
                self.zones.push(Zone::from_bits(r.zone));
            }
            let pulse = &mut self.pulses[q];
            pulse.offset = offset;
            pulse.count = count;
            self.n_local += count;
            // The first move_x brings the positions; images are made from their table, below.
            if q < self.exchanged_pulses {
                self.move_x_pulse(q, false)?;
            }
        }
        self.list_images();
        for q in self.exchanged_pulses..self.pulses.len() {
            self.move_x_pulse(q, false)?;
        }
        let me = self.rt.my_pe();
        let shapes: Vec<PulseShape<'_>> = self.pulses[..self.pulses_run()]
            .iter()
            .map(|p| PulseShape { exchanged: p.to != me, send: &p.send, offset: p.offset, count: p.count })
            .collect();
        self.schedule = Schedule::of(&shapes, self.n_home);
        // Each pulse's returned forces have a region of their own: several may be in flight.
        self.force_scratch.collective_ensure(self.schedule.scratch_len)?;
        // Room for every local atom, whoever makes the images.
        self.forces.collective_ensure(self.n_local)?;
        // The one-sided force exchanges stage each pulse's halo forces for their owner.
        for pulse in &mut self.pulses {
            pulse.f.collective_reserve(pulse.count)?;
        }
        Ok(())
    }

    /// The images the pulses along dimensions of one domain make, resolved to the stored atom
    /// each is an image of and the box vectors it is shifted by: the table a force kernel
    /// works from under [`PeriodicImages::Kernel`](crate::PeriodicImages::Kernel).
    fn list_images(&mut self) {
        let first = self.pulses.get(self.exchanged_pulses).map_or(self.n_local, |p| p.offset);
        let vectors: [[R; 3]; 3] = std::array::from_fn(|d| self.grid.pbc().vector_real(d));
        let mut table: Vec<PeriodicImage<R>> = Vec::with_capacity(self.n_local - first);
        for pulse in &self.pulses[self.exchanged_pulses..] {
            debug_assert_eq!(pulse.offset, first + table.len());
            for &i in &pulse.send {
                let i = i as usize;
                let mut image = if i < first {
                    PeriodicImage { atom: i as u32, cells: [0; 3], vector: [R::ZERO; 3] }
                } else {
                    table[i - first]
                };
                // The shift: the box vectors summed in the order of the pulses.
                image.cells[pulse.dim] += 1;
                for (sum, &v) in image.vector.iter_mut().zip(&vectors[pulse.dim]) {
                    *sum += v;
                }
                table.push(image);
            }
        }
        self.image_table = table;
    }

    /// Pulse `q` of a per-atom field: sends the entries of the pulse's send list and appends
    /// the `count` entries received.
    pub(super) fn field_pulse<T: Pod>(&mut self, q: usize, count: usize, values: &mut Vec<T>) -> Result<()> {
        let width = size_of::<T>();
        self.byte_buffer.collective_ensure(count * width)?;
        let pulse = &self.pulses[q];
        let packed: Vec<T> = pulse.send.iter().map(|&i| values[i as usize]).collect();
        if pulse.to == self.rt.my_pe() {
            check_count(packed.len(), count, pulse.from, "entries of a per-atom field")?;
            values.extend(packed);
            return Ok(());
        }
        let (to, from) = (pulse.to, pulse.from);
        let received = self
            .bytes
            .call(&[self.byte_buffer.array()])
            .send(&[Outgoing::Copy { to, data: bytemuck::cast_slice::<T, u8>(&packed) }])
            .receive(&[Incoming { from, buffer: 0, offset: 0, room: count * width }])
            .run()?[0];
        check_count(received, count * width, from, "bytes of a per-atom field")?;
        let mut arrived = vec![0u8; received];
        self.byte_buffer.array().read_local(0, &mut arrived)?;
        values.extend(arrived.chunks_exact(width).map(bytemuck::pod_read_unaligned::<T>));
        Ok(())
    }

    /// One pulse of move_x: the shifted coordinates of the send list are packed straight into
    /// the receiver's coordinate array where the path allows it (one-sided, same node), or
    /// into a buffer that is then sent.
    ///
    /// With `start`, the pulse's call is only started ([`onesided::Call::start`]): its
    /// finish, in the split step, checks the count.
    pub(super) fn move_x_pulse(&mut self, q: usize, start: bool) -> Result<()> {
        let coords = self.coords.array();
        let parallel_min = self.parallel_min;
        let pulse = &mut self.pulses[q];
        // SAFETY: the prefix up to this pulse's receive region holds home atoms and atoms
        // received in earlier pulses of this call: no PE writes it until this PE announces
        // its receive regions again in the next move_x. The destination a packing function
        // gets is this pulse's receive region on another PE (or, with one domain along the
        // dimension, this PE's own region beyond the prefix): never the prefix.
        let prefix = unsafe { coords.local_range(0..pulse.offset) };
        // The shift is a whole vector, added in registers and stored at once.
        let delta = pulse.shift;
        let send = &pulse.send;
        let pack = |(out, &i): (&mut [R; 3], &u32)| {
            let x = prefix[i as usize];
            *out = [x[0] + delta[0], x[1] + delta[1], x[2] + delta[2]];
        };
        let fill = |dest: &mut [&mut [[R; 3]]]| {
            let dest = &mut *dest[0];
            if !parallel(send.len(), parallel_min) {
                dest.iter_mut().zip(send).for_each(pack);
            } else {
                dest.par_iter_mut().zip(send.par_iter()).for_each(pack);
            }
        };
        if pulse.to == self.rt.my_pe() {
            // The periodic images along a dimension with one domain: each made here from its
            // stored atom and its whole shift (the same positions a kernel that makes them
            // itself computes), with no message, on every path.
            check_count(send.len(), pulse.count, pulse.from, "coordinates")?;
            let first = self.n_local - self.image_table.len();
            let images = &self.image_table[pulse.offset - first..][..pulse.count];
            // SAFETY: this pulse's receive region follows the prefix, which holds every stored
            // atom (images name those); with this PE its own partner, no other PE writes the
            // region in this pulse (nobody else sends to it), and nothing else refers to it
            // while it is filled.
            let region =
                unsafe { std::slice::from_raw_parts_mut(coords.as_ptr().add(pulse.offset), pulse.count) };
            let make = |(out, image): (&mut [R; 3], &PeriodicImage<R>)| {
                *out = image.position(prefix[image.atom as usize])
            };
            if !parallel(images.len(), parallel_min) {
                region.iter_mut().zip(images).for_each(make);
            } else {
                region.par_iter_mut().zip(images.par_iter()).for_each(make);
            }
            return Ok(());
        }
        let (outgoing, incoming) = (
            [Outgoing::Packed { to: pulse.to, count: send.len() }],
            [Incoming { from: pulse.from, buffer: 0, offset: pulse.offset, room: pulse.count }],
        );
        let buffers = [coords];
        let call = pulse.x.call(&buffers).send(&outgoing).receive(&incoming).pack(fill);
        if start {
            // SAFETY: the coordinate array is a field of the exchange, which finishes or
            // abandons every call in flight before it frees it (its Drop); while the call is
            // in flight this PE reads the home atoms only (the view of the split step and
            // `coordinates` stop there) and writes no coordinates, and a packed message
            // leaves no data of the caller's behind.
            return unsafe { call.start() }.map_err(Into::into);
        }
        let received = call.run()?[0];
        check_count(received, pulse.count, pulse.from, "coordinates")
    }
}
