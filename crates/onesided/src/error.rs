//! The one error type of the crate.

use std::fmt;
use std::time::Duration;

/// What went wrong, with the context needed to act on it: which PE, which array, which
/// environment variable to raise.
///
/// A protocol error of an exchange is a value a caller can match ([`Error::Exchange`] with
/// an [`ExchangeProblem`]), not a string. Input a caller can get wrong is an error, not a
/// panic (the `unsafe` views of a range, which say so under **Panics**, are the exception).
/// [`scope`](Self::scope) says which PEs see an error, and so whether the job can end
/// normally.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// [`Runtime::init`](crate::Runtime::init) was called while a runtime exists or after one
    /// was finalised.
    #[error(
        "the onesided runtime was already initialised in this process; MPI and OpenSHMEM can be \
         initialised only once, so create one Runtime and pass &Runtime to whatever needs it"
    )]
    AlreadyInitialized,

    /// MPI was initialised by other code before [`Runtime::init`](crate::Runtime::init).
    #[error(
        "MPI is already initialised by other code: a program that starts MPI itself attaches the \
         runtime to it with onesided::Runtime::attach (and finalises MPI itself); Runtime::init \
         starts MPI for a program that does not"
    )]
    MpiAlreadyInitialized,

    /// [`Runtime::attach`](crate::Runtime::attach) found no MPI to attach to.
    #[error(
        "Runtime::attach needs MPI initialised by the program first (MPI_Init_thread with \
         MPI_THREAD_MULTIPLE) and not yet finalised; without MPI of its own, use Runtime::init"
    )]
    MpiNotInitialized,

    /// The host initialised MPI with less thread support than the runtime needs.
    #[error(
        "the program initialised MPI with thread level {provided}, but onesided needs MULTIPLE so \
         that worker threads of a PE may communicate: initialise MPI with MPI_Init_thread(&argc, \
         &argv, MPI_THREAD_MULTIPLE, &provided) (rsmpi: initialize_with_threading(Threading::Multiple))"
    )]
    HostThreadLevel {
        /// The level MPI granted the program.
        provided: String,
    },

    /// Under Open MPI's OSHMEM, the program's MPI is not the Open MPI 4.1 that
    /// [`Runtime::attach`](crate::Runtime::attach) was made and tested for.
    #[error(
        "Runtime::attach under Open MPI's OSHMEM ends OpenSHMEM inside the program's MPI_Finalize \
         in a way made for Open MPI 4.1, and this is {version}; use Open MPI 4.1, Sandia OpenSHMEM, \
         or Runtime::init in a program that leaves MPI to the runtime"
    )]
    HostMpiUntested {
        /// The MPI library's version line.
        version: String,
    },

    /// The library does not provide the thread support the runtime needs.
    #[error(
        "{library} provides thread level {provided}, but onesided needs MULTIPLE so that worker \
         threads of a PE may communicate; use a {library} build with thread support"
    )]
    ThreadSupport {
        /// `"MPI"` or `"OpenSHMEM"`.
        library: &'static str,
        /// The level the library granted.
        provided: String,
    },

    /// `shmem_init_thread` returned an error code.
    #[error("shmem_init_thread failed with code {code}; check the launcher's messages above")]
    InitFailed {
        /// The return code.
        code: i32,
    },

    /// An environment variable has a value the runtime cannot work with.
    #[error("environment variable {variable}={value:?}: {problem}")]
    Environment {
        /// The variable.
        variable: &'static str,
        /// Its value (empty when unset).
        value: String,
        /// What is wrong and what to set instead.
        problem: String,
    },

    /// `ONESIDED_NODE_HEAP=1` asked for the heaps of each node's PEs to be shared, and that
    /// failed (on every PE alike).
    #[error(
        "PE {pe}: the symmetric heaps of the node's PEs could not be shared ({problem}); set \
         ONESIDED_NODE_HEAP=auto to fall back on library calls between them"
    )]
    NodeHeap {
        /// The PE reporting.
        pe: usize,
        /// What failed, and on which PE.
        problem: String,
    },

    /// A PE number outside `0..n_pes`.
    #[error("{what}: PE {pe} does not exist, the job has {n_pes} PEs (0..{n_pes})")]
    InvalidPe {
        /// The operation and the object it was called on.
        what: String,
        /// The PE asked for.
        pe: usize,
        /// The number of PEs.
        n_pes: usize,
    },

    /// A remote access that would leave the symmetric array; nothing was transferred.
    #[error(
        "{op} of elements {offset}..{end} on PE {pe}'s '{array}' is out of bounds: the array \
         has {len} elements; nothing was transferred",
        end = offset.saturating_add(*count)
    )]
    OutOfBounds {
        /// `"put"`, `"get"`, ...
        op: &'static str,
        /// The array's name.
        array: String,
        /// The target PE.
        pe: usize,
        /// The first element.
        offset: usize,
        /// The number of elements.
        count: usize,
        /// The array's length.
        len: usize,
    },

    /// A symmetric allocation does not fit the symmetric heap.
    #[error(
        "symmetric heap exhausted: allocating {bytes} bytes for '{array}' failed on PE {pe}; \
         raise {variable} (now {current}), for example {variable}=2G"
    )]
    HeapExhausted {
        /// The array being allocated.
        array: String,
        /// The bytes asked for.
        bytes: usize,
        /// A PE on which the allocation failed.
        pe: usize,
        /// The variable that sizes the heap for the implementation in use.
        variable: &'static str,
        /// Its current value, or the default.
        current: String,
    },

    /// The symmetric heap cannot hold an allocation besides what is already in use: found
    /// before the implementation is asked, on every PE alike.
    #[error(
        "symmetric heap too small: '{array}' needs {} MiB more, with {} MiB in use, in a heap of \
         {} MiB ({variable}={current}); raise {variable}, for example {variable}={suggest}",
        mib(*bytes),
        mib(*in_use),
        mib(*capacity)
    )]
    HeapTooSmall {
        /// The array being allocated.
        array: String,
        /// The bytes asked for, alignment included.
        bytes: usize,
        /// The bytes this crate's allocations already hold.
        in_use: usize,
        /// The heap's size, as the implementation reads the variable.
        capacity: usize,
        /// The variable that sizes the heap for the implementation in use.
        variable: &'static str,
        /// Its current value, or the default.
        current: String,
        /// A value that fits what is in use and the request, with a quarter to spare.
        suggest: String,
    },

    /// The launcher and the libraries disagree on the job: a launch that would start every
    /// process as a job of one PE, or MPI and OpenSHMEM that joined different jobs. Found by
    /// [`Runtime::init`](crate::Runtime::init) on every process ([`crate::doctor`]).
    #[error("{problem}; {fix}")]
    Launch {
        /// What the launcher and the libraries said.
        problem: String,
        /// What to launch with instead.
        fix: String,
    },

    /// The PEs were started with different libraries or settings, which would end in a hang
    /// or wrong results. Found by [`Runtime::init`](crate::Runtime::init) on every PE
    /// ([`crate::doctor`]).
    #[error("the PEs disagree on {setting}: PE 0 has {first}, PE {pe} has {other}; {fix}")]
    SettingsDiffer {
        /// The library or variable.
        setting: String,
        /// The lowest PE whose value differs from PE 0's.
        pe: usize,
        /// PE 0's value.
        first: String,
        /// That PE's value.
        other: String,
        /// How to give every PE the same.
        fix: String,
    },

    /// A PE runs with address-space randomisation on where Sandia OpenSHMEM reaches the PEs
    /// of a node through cross-memory attach, which writes at the sender's addresses: the
    /// first barrier would abort every PE. Found by
    /// [`Runtime::init`](crate::Runtime::init) on every PE ([`crate::doctor`]).
    #[error(
        "PE {pe} runs with address-space randomisation on, and Sandia OpenSHMEM here reaches the \
         PEs of a node through CMA (process_vm_writev at the sender's addresses), so its first \
         barrier would abort every PE; start each PE under `setarch $(uname -m) -R` (`srun \
         --mpi=pmix setarch x86_64 -R ./program`, `mpirun ... setarch x86_64 -R ./program`; \
         scripts/pe-run does it), or run one PE per node"
    )]
    AddressRandomisation {
        /// The lowest PE with randomisation on (on a node with other PEs).
        pe: usize,
    },

    /// The symmetric heap no longer has the same layout on every PE: an allocation landed at
    /// different offsets (an earlier allocation or free happened on some PEs only: collectives
    /// issued from several threads, a panic caught on one PE, raw `shmem-sys` allocations).
    /// Nothing was allocated.
    #[error(
        "allocation #{index} '{array}' landed at different heap offsets on different PEs (PE {pe} \
         differs from PE 0): some earlier allocation or free happened on some PEs only; issue \
         collectives from one thread per PE, in the same order everywhere"
    )]
    HeapDiverged {
        /// The allocation's sequence number in this run (0 is the first).
        index: u64,
        /// The array's name.
        array: String,
        /// A PE whose offset differs from PE 0's.
        pe: usize,
    },

    /// An exact allocation asked for different sizes on different PEs; nothing was allocated.
    #[error(
        "asymmetric allocation #{index} '{array}': PE 0 asked for {expected} but PE {pe} asked \
         for {asked}; exact allocations need the same length and element size on every PE (use \
         GlobalMaxArray when PEs need different sizes)"
    )]
    AsymmetricAllocation {
        /// The allocation's sequence number in this run (0 is the first).
        index: u64,
        /// The array's name.
        array: String,
        /// The first PE that disagrees with PE 0.
        pe: usize,
        /// What PE 0 asked for, as "N elements of S bytes".
        expected: String,
        /// What `pe` asked for.
        asked: String,
    },

    /// A grow-to-global-max array stopped growing and a later request exceeds it.
    #[error(
        "'{array}' on PE {pe} needs {needed} elements but its capacity was frozen at {capacity} \
         after {stable_calls} calls without growth; allocate with a larger GrowthPolicy::freeze_after \
         (or None, never freeze)"
    )]
    CapacityFrozen {
        /// The array's name.
        array: String,
        /// The PE that needs more.
        pe: usize,
        /// Elements needed.
        needed: usize,
        /// The frozen capacity.
        capacity: usize,
        /// The stable calls after which it froze.
        stable_calls: u32,
    },

    /// A length in elements overflows the address space.
    #[error("'{array}': {len} elements of {elem_size} bytes overflow the address space")]
    SizeOverflow {
        /// The array's name.
        array: String,
        /// The length asked for.
        len: usize,
        /// The element size.
        elem_size: usize,
    },

    /// A wait ran out of time: the diagnosis of what would otherwise be a hang.
    #[error(
        "PE {pe} waited {waited:.1?} for {what}{from} to reach {awaited}, but it is {seen}; a \
         peer is late, stuck or not taking part (raise ONESIDED_WAIT_TIMEOUT, in seconds, if it \
         is only slow)",
        from = FromPe(*peer)
    )]
    WaitTimeout {
        /// The waiting PE.
        pe: usize,
        /// What was awaited: the signal or counter and its array.
        what: String,
        /// The PE expected to update it, when known.
        peer: Option<usize>,
        /// The value awaited (`>=`).
        awaited: u64,
        /// The value seen when the time ran out.
        seen: u64,
        /// How long the PE waited.
        waited: Duration,
    },

    /// A message does not fit the room its receiver gave; it was rejected (on the one-sided
    /// put path before anything was written). Reported by both the sender and the receiver
    /// where the path lets both know.
    #[error(
        "the message from PE {pe} to PE {to} through '{channel}' ({size}) does not fit the room \
         of {room} elements the receiver gave; it was rejected",
        size = MessageSize(*count)
    )]
    MessageTooLarge {
        /// The sending PE.
        pe: usize,
        /// The receiving PE.
        to: usize,
        /// The send-receive channel.
        channel: String,
        /// Elements in the message, when the path tells.
        count: Option<usize>,
        /// Room the receiver gave.
        room: usize,
    },

    /// An MPI call of a reference path returned an error code.
    #[error("{call} failed with MPI error code {code}")]
    Mpi {
        /// The MPI routine.
        call: &'static str,
        /// Its return code.
        code: i32,
    },

    /// An argument that cannot be used, with what to pass instead, found by this PE alone.
    #[error("{0}")]
    InvalidArgument(String),

    /// An argument of a collective call that cannot be used, found after the PEs compared
    /// what they passed (lengths that differ, an invalid value on some PE): every PE returns
    /// this error from the same call, and nothing was changed.
    #[error("{0}")]
    CollectiveArgument(String),

    /// An exchange call that breaks its protocol: what went wrong, as a value a caller can
    /// match on, and the channel it happened on.
    #[error("exchange '{channel}': {problem}")]
    Exchange {
        /// The exchange's name.
        channel: String,
        /// What was wrong.
        problem: ExchangeProblem,
    },
}

/// How an [`Exchange`](crate::Exchange) call broke its protocol (see [`Error::Exchange`]).
/// Every one is found before anything of the call moves, or is reported on both sides.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExchangeProblem {
    /// A message to or from a PE the exchange was not built for.
    #[error(
        "PE {pe} is not a partner of PE {me} (it named {named:?}); name every PE it talks to in \
         the exchange's builder (ExchangeBuilder::partners)"
    )]
    NotAPartner {
        /// The PE.
        pe: usize,
        /// This PE.
        me: usize,
        /// The partners this PE named.
        named: Vec<usize>,
    },
    /// A partner that is not a PE of the job.
    #[error("partner {pe} is not a PE of this job of {n_pes} PEs")]
    NoSuchPartner {
        /// The partner named.
        pe: usize,
        /// The job's PE count.
        n_pes: usize,
    },
    /// One PE names another as a partner, which does not name it back.
    #[error(
        "PE {pe} names PE {partner} as a partner, but PE {partner} does not name it back; partnership must be mutual"
    )]
    NotMutual {
        /// The PE that named a partner.
        pe: usize,
        /// The partner that did not name it.
        partner: usize,
    },
    /// More messages between one pair of PEs in one call than [`LANES`](crate::LANES).
    #[error("more than {lanes} messages {} PE {pe} in one call", if *.sending { "to" } else { "from" })]
    TooManyMessages {
        /// The other PE.
        pe: usize,
        /// Whether this PE sends them (else receives them).
        sending: bool,
        /// The most allowed.
        lanes: usize,
    },
    /// A receive names a buffer the call did not pass.
    #[error("buffer {index} of {count} for the message from PE {from}")]
    NoSuchBuffer {
        /// The buffer index.
        index: usize,
        /// How many buffers the call passed.
        count: usize,
        /// The sender of the message.
        from: usize,
    },
    /// Two PEs passed different buffer lists: the receiver's place is not in the sender's
    /// list. Every PE must pass the same buffers in the same order.
    #[error(
        "PE {receiver} announced buffer {buffer} (offset {offset}, room {room}) for the message from PE \
         {sender}, which has no such place; the two PEs passed different buffers; every PE must pass \
         the same buffers in the same order"
    )]
    BuffersDiffer {
        /// The sending PE.
        sender: usize,
        /// The receiving PE.
        receiver: usize,
        /// The announced buffer.
        buffer: u64,
        /// The announced offset.
        offset: u64,
        /// The announced room.
        room: u64,
    },
    /// Two incoming messages would share elements of one buffer.
    #[error(
        "the messages from PE {first} and PE {second} would share elements of buffer {buffer}; give each \
         incoming message its own region"
    )]
    Overlapping {
        /// The sender of one message.
        first: usize,
        /// The sender of the other.
        second: usize,
        /// The buffer.
        buffer: usize,
    },
    /// A message larger than the get or buffered path reserved.
    #[error(
        "a message of {largest} elements exceeds the {reserved} reserved per message on this path; call \
         collective_reserve with the largest message first"
    )]
    NotReserved {
        /// The largest message of the call.
        largest: usize,
        /// Elements reserved per message.
        reserved: usize,
    },
    /// A receive from this PE was posted already and not yet consumed.
    #[error("a receive from PE {from} is already posted; exchange before posting again")]
    AlreadyPosted {
        /// The sender.
        from: usize,
    },
    /// `collective_reserve` on an exchange whose links may change with the reserved size,
    /// while a receive is posted on some PE.
    #[error(
        "a receive is posted on some PE while collective_reserve may change the exchange's links with the \
         size of its messages; reserve before posting receives"
    )]
    PostedAcrossReserve,
    /// A call receives differently from what was posted for it.
    #[error(
        "a receive from PE {from} was posted for another place than this call receives into; a posted receive must be consumed as posted"
    )]
    PostedMismatch {
        /// The sender.
        from: usize,
    },
    /// A call sends packed messages but gives no function to pack them.
    #[error("the call sends packed messages but has no packing function; give one with Call::pack")]
    NoPacking,
    /// A region offered to one PE is also where a message from another lands in the same call.
    #[error(
        "the region of buffer {buffer} offered to PE {to} is also where the message from PE {from} \
         lands; an offered region must stay unwritten until it is taken"
    )]
    OfferReceived {
        /// The receiver of the offer.
        to: usize,
        /// The sender of the message received into it.
        from: usize,
        /// The buffer.
        buffer: usize,
    },
    /// The call numbers of one pair are used up (about 10^12 calls).
    #[error("its call numbers with one partner are used up; create a new exchange")]
    CallsExhausted,
    /// Another operation on an exchange whose started call is not finished.
    #[error("{operation} while a started call is in flight; finish it first (Exchange::finish)")]
    InFlight {
        /// What was asked.
        operation: &'static str,
    },
    /// `finish` on an exchange with no started call.
    #[error("finish without a started call; start one with Call::start")]
    NotStarted,
    /// `finish` with other buffers than its call was started with.
    #[error(
        "finish was given {given} buffers other than the {started} its call was started with; pass the same list"
    )]
    FinishBuffers {
        /// Buffers the call was started with.
        started: usize,
        /// Buffers given to finish.
        given: usize,
    },
}

/// Formats the optional updating PE of a wait.
struct FromPe(Option<usize>);

impl fmt::Display for FromPe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(pe) => write!(f, " (updated by PE {pe})"),
            None => Ok(()),
        }
    }
}

/// Which PEs see an error: what a caller does next depends on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorScope {
    /// Every PE taking part in the collective call (the whole job, or every member of the
    /// group) returns this error from the same call: the PEs can end normally together, or
    /// go on, as the call's documentation says.
    EveryPe,
    /// Only this PE (and at most the partner of a refused message) sees it; the other PEs
    /// may be waiting for this one. End the job with
    /// [`Runtime::abort`](crate::Runtime::abort) rather than returning.
    ThisPe,
}

impl Error {
    /// Whether every PE returns this error from the same call, or only this PE.
    pub fn scope(&self) -> ErrorScope {
        match self {
            Error::NodeHeap { .. }
            | Error::HeapDiverged { .. }
            | Error::AsymmetricAllocation { .. }
            | Error::HeapExhausted { .. }
            | Error::HeapTooSmall { .. }
            | Error::Launch { .. }
            | Error::SettingsDiffer { .. }
            | Error::AddressRandomisation { .. }
            | Error::CollectiveArgument(_) => ErrorScope::EveryPe,
            Error::Exchange { problem, .. } => problem.scope(),
            _ => ErrorScope::ThisPe,
        }
    }
}

impl ExchangeProblem {
    /// Whether every PE sees this problem (found while the PEs agree on an exchange's
    /// partners) or only this PE (a call's own arguments, or a refused message).
    pub fn scope(&self) -> ErrorScope {
        match self {
            ExchangeProblem::NoSuchPartner { .. } | ExchangeProblem::NotMutual { .. } => ErrorScope::EveryPe,
            _ => ErrorScope::ThisPe,
        }
    }
}

/// Bytes in MiB, rounded up, for messages.
fn mib(bytes: usize) -> usize {
    bytes.div_ceil(1 << 20)
}

/// Formats a message size that may be unknown.
struct MessageSize(Option<usize>);

impl fmt::Display for MessageSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(count) => write!(f, "{count} elements"),
            None => f.write_str("more elements"),
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
