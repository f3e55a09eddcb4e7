//! PME redistribution of coordinates and charges to the PME ranks, and of forces back, over
//! `onesided` and over MPI two-sided with identical results.
#![deny(missing_docs)]
