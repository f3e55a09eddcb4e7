//! The objects behind the C handles: one registry per thread, holding the runtime and every
//! object made from it, each under a number that is never given twice.
//!
//! A C handle is that number in a struct of one field (so that the compiler tells the kinds
//! apart). A handle freed, never made, of another kind or made on another thread finds no
//! object of its kind here and is refused with [`ONESIDED_ERROR_HANDLE`]: unlike a pointer,
//! a stale number cannot reach freed memory.
//!
//! The objects borrow the runtime (`SymArray<'rt, _>` and the rest). The registry owns the
//! runtime in a box, whose address stays put, and lends it to them as `'static`; it drops the
//! box only after every object made from it ([`end`]). The registry itself is never
//! dropped: at a thread's exit its objects are left alone, since freeing symmetric memory is
//! collective and MPI may be gone by then.
//!
//! [`ONESIDED_ERROR_HANDLE`]: crate::status::onesided_status::ONESIDED_ERROR_HANDLE

use std::any::Any;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::mem::ManuallyDrop;
use std::rc::Rc;

use onesided::Runtime;

use crate::status::Failure;

/// The runtime and the objects made from it, on the thread that started it.
#[derive(Default)]
struct Registry {
    /// The runtime's number and the runtime.
    runtime: Option<(u64, Box<Runtime>)>,
    /// The last number given (numbers start at 1; 0 is the null handle).
    last: u64,
    /// Every object alive, by number (so in the order they were made), with its kind's name.
    objects: BTreeMap<u64, (&'static str, Rc<dyn Any>)>,
}

thread_local! {
    /// This thread's registry (a runtime and its objects live on the thread that made them).
    static REGISTRY: ManuallyDrop<RefCell<Registry>> = ManuallyDrop::new(RefCell::new(Registry::default()));
}

/// The registry, mutably: refused when a call is already under way on this thread (a C
/// callback reentering the library).
fn with_registry<R>(f: impl FnOnce(&mut Registry) -> Result<R, Failure>) -> Result<R, Failure> {
    REGISTRY.with(|cell| {
        let mut registry = cell.try_borrow_mut().map_err(|_| {
            Failure::argument("a onesided call was made while another was under way on this thread")
        })?;
        f(&mut registry)
    })
}

/// Keeps a runtime just started; its number. Refused when this thread has one already.
pub(crate) fn start(runtime: Runtime) -> Result<u64, Failure> {
    with_registry(|r| {
        if r.runtime.is_some() {
            return Err(Failure::argument("this process has a onesided runtime already: use it"));
        }
        r.last += 1;
        crate::status::set_pe(Some(runtime.my_pe()));
        r.runtime = Some((r.last, Box::new(runtime)));
        Ok(r.last)
    })
}

/// The runtime under number `id`, lent for as long as the registry keeps it.
pub(crate) fn runtime(id: u64) -> Result<&'static Runtime, Failure> {
    with_registry(|r| match &r.runtime {
        Some((number, rt)) if *number == id && id != 0 => {
            let rt: *const Runtime = &**rt;
            // SAFETY: the box is dropped only by `end`, after every object it lent the
            // runtime to, and a C host that calls after `end` finds no runtime here (the
            // number is never given again); the pointee does not move while boxed.
            Ok(unsafe { &*rt })
        }
        _ => Err(missing(r, "onesided_runtime", id)),
    })
}

/// Keeps an object made from the runtime; its number.
pub(crate) fn insert<T: Any>(kind: &'static str, object: T) -> Result<u64, Failure> {
    with_registry(|r| {
        if r.runtime.is_none() {
            return Err(Failure::handle(format!("a {kind} needs a runtime on this thread")));
        }
        r.last += 1;
        r.objects.insert(r.last, (kind, Rc::new(object)));
        Ok(r.last)
    })
}

/// The object of kind `T` under number `id`, shared for the length of a call (so that a call
/// may hold several: a put with signal holds an array and a signal array).
pub(crate) fn get<T: Any>(kind: &'static str, id: u64) -> Result<Rc<T>, Failure> {
    with_registry(|r| match r.objects.get(&id).map(|(_, o)| Rc::clone(o).downcast::<T>()) {
        Some(Ok(object)) => Ok(object),
        _ => Err(missing(r, kind, id)),
    })
}

/// Takes the object of kind `T` under number `id` out of the registry; it is dropped (which
/// may communicate) when its caller lets it go, outside the registry.
pub(crate) fn remove<T: Any>(kind: &'static str, id: u64) -> Result<Rc<T>, Failure> {
    with_registry(|r| {
        if !r.objects.get(&id).is_some_and(|(_, o)| o.is::<T>()) {
            return Err(missing(r, kind, id));
        }
        let (_, object) = r.objects.remove(&id).expect("present: checked");
        Ok(object.downcast::<T>().unwrap_or_else(|_| unreachable!("of kind T: checked")))
    })
}

/// Frees the object of kind `T` whose handle is at `handle` (a handle struct's one `u64`)
/// and sets the handle to 0; `what` names the argument in the message for a null pointer.
///
/// # Safety
/// `handle` is null or points to a handle.
pub(crate) unsafe fn free<T: Any>(handle: *mut u64, kind: &'static str, what: &str) -> Result<(), Failure> {
    if handle.is_null() {
        return Err(Failure::argument(format!("{what} is a null pointer: pass &{what}")));
    }
    // SAFETY: not null; the caller passes a pointer to a handle.
    let id = unsafe { *handle };
    // Dropped here, outside the registry's borrow: the drop may communicate.
    drop(remove::<T>(kind, id)?);
    // SAFETY: as above.
    unsafe { *handle = 0 };
    Ok(())
}

/// Ends the runtime under number `id`: drops every object still alive, the last made first,
/// then the runtime. How many objects were left.
pub(crate) fn end(id: u64) -> Result<usize, Failure> {
    runtime(id)?;
    let mut left = 0;
    // One at a time, outside the registry's borrow: a drop frees symmetric memory, collectively.
    while let Some(object) = with_registry(|r| Ok(r.objects.pop_last()))? {
        drop(object);
        left += 1;
    }
    let rt = with_registry(|r| Ok(r.runtime.take()))?;
    crate::status::set_pe(None);
    drop(rt);
    Ok(left)
}

/// The error for a handle that names no object of its kind.
fn missing(r: &Registry, kind: &str, id: u64) -> Failure {
    if id == 0 {
        return Failure::handle(format!("a null {kind}: pass one a onesided call made"));
    }
    let other = match &r.runtime {
        Some((number, _)) if *number == id => Some("onesided_runtime"),
        _ => r.objects.get(&id).map(|(k, _)| *k),
    };
    Failure::handle(match other {
        Some(actual) => format!("handle {id} is a {actual}, not a {kind}"),
        None => format!(
            "{kind} {id} is not alive on this thread: it was freed (or its runtime was), or it \
             was made on another thread (call onesided from the thread that started it)"
        ),
    })
}
