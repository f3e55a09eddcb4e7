// onesided.hpp: a header-only C++17 wrapper over onesided.h, the C ABI of onesided.
//
// The runtime, symmetric bytes, signals, the send-receive, md-halo's halo exchange and
// pme-redist's PME. Handles are RAII objects (move-only; the destructor frees, which is collective like the C
// free), and a failed call throws onesided::error, which carries the status, the message
// (naming the PE, what went wrong and what to do) and whether every PE saw it:
//
//     MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
//     try {
//         auto rt = onesided::runtime::attach();          // MPI_COMM_WORLD
//         onesided::exchange halo(rt, "halo", onesided::path::onesided, neighbours, max_bytes);
//         std::size_t got = halo.sendrecv(send, n_send, dest, recv, room, source);
//     } catch (const onesided::error &e) {
//         std::fprintf(stderr, "%s\n", e.what());
//         if (!e.every_pe()) onesided::abort(1);           // the others would wait for this PE
//         MPI_Abort(MPI_COMM_WORLD, 1);
//     }
//     MPI_Finalize();
//
// A destructor that fails cannot throw: it prints the message on stderr and ends the job
// (onesided_abort), since a free that failed on one PE leaves the others waiting.
#ifndef ONESIDED_HPP
#define ONESIDED_HPP

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "onesided.h"

namespace onesided {

/// A failed call: its status, its message, and whether every PE got it from the same
/// collective (end normally) or this PE alone (end the job with onesided::abort).
class error : public std::runtime_error {
  public:
    error(onesided_status status, const char *message, bool every_pe)
        : std::runtime_error(message), status_(status), every_pe_(every_pe) {}
    /// The status the C call returned.
    onesided_status status() const noexcept { return status_; }
    /// Whether every PE returned this error from the same collective call.
    bool every_pe() const noexcept { return every_pe_; }

  private:
    onesided_status status_;
    bool every_pe_;
};

/// Throws onesided::error for a status other than ONESIDED_OK.
inline void check(onesided_status status) {
    if (status != ONESIDED_OK)
        throw error(status, onesided_last_error(), onesided_last_error_every_pe() != 0);
}

/// How an exchange travels.
enum class path : onesided_path {
    onesided = ONESIDED_PATH_ONESIDED,  ///< OpenSHMEM: the offset swap's puts.
    mpi = ONESIDED_PATH_MPI,            ///< MPI two-sided, the reference.
    automatic = ONESIDED_PATH_AUTO,     ///< Per partner, the transport measured fastest.
};

/// The path named "onesided", "mpi" or "auto".
inline path path_from_name(const std::string &name) {
    onesided_path value = ONESIDED_PATH_ONESIDED;
    check(onesided_path_from_name(name.c_str(), &value));
    return static_cast<path>(value);
}

namespace detail {
/// A destructor's free that failed: say so and end the job (it cannot throw).
inline void fatal(onesided_status status) noexcept {
    if (status == ONESIDED_OK) return;
    std::fprintf(stderr, "onesided: a free in a destructor failed: %s\n", onesided_last_error());
    onesided_runtime none = {0};
    onesided_abort(none, 1, nullptr);
}
}  // namespace detail

/// The runtime: MPI and OpenSHMEM for this process. Outlives every object made from it
/// (its destructor frees what is left, as onesided_runtime_free does).
class runtime {
  public:
    /// Starts MPI and OpenSHMEM (a program that has not started MPI). Collective.
    static runtime init() {
        onesided_runtime rt;
        check(onesided_init(&rt));
        return runtime(rt);
    }
    /// Joins the program's MPI (initialised with MPI_THREAD_MULTIPLE); `comm` points to
    /// its communicator (the world or a duplicate), or is null for MPI_COMM_WORLD.
    /// Collective.
    static runtime attach(const void *comm = nullptr) {
        onesided_runtime rt;
        check(onesided_attach(comm, &rt));
        return runtime(rt);
    }
    runtime(runtime &&other) noexcept : handle_(std::exchange(other.handle_, onesided_runtime{0})) {}
    runtime &operator=(runtime &&other) noexcept {
        if (this != &other) {
            reset();
            handle_ = std::exchange(other.handle_, onesided_runtime{0});
        }
        return *this;
    }
    runtime(const runtime &) = delete;
    runtime &operator=(const runtime &) = delete;
    ~runtime() { reset(); }

    /// Ends the runtime now (collective); the object is then empty.
    void reset() noexcept {
        if (handle_.id != 0) detail::fatal(onesided_runtime_free(&handle_));
    }
    /// This PE's number.
    int my_pe() const {
        int pe = -1;
        check(onesided_my_pe(handle_, &pe));
        return pe;
    }
    /// The number of PEs.
    int n_pes() const {
        int n = 0;
        check(onesided_n_pes(handle_, &n));
        return n;
    }
    /// Waits for every PE, every put complete. Collective.
    void barrier() const { check(onesided_barrier(handle_)); }
    /// Lets the libraries move what is in flight (onesided_progress), between a kernel's chunks.
    void progress() const { check(onesided_progress(handle_)); }
    /// Waits until this PE's puts are complete at their targets.
    void quiet() const { check(onesided_quiet(handle_)); }
    /// Ends the whole job from this PE, printing `message` first.
    [[noreturn]] void abort(int code, const char *message = nullptr) const {
        onesided_abort(handle_, code, message);
    }
    /// The C handle, for calls the wrapper does not cover.
    onesided_runtime handle() const noexcept { return handle_; }

  private:
    explicit runtime(onesided_runtime rt) : handle_(rt) {}
    onesided_runtime handle_;
};

/// Ends the job from this PE without a runtime at hand.
[[noreturn]] inline void abort(int code, const char *message = nullptr) {
    onesided_runtime none = {0};
    onesided_abort(none, code, message);
}

/// Signals with a copy on every PE.
class signals {
  public:
    /// Allocates `count` signals, all 0. Collective.
    signals(const runtime &rt, const std::string &name, std::size_t count) {
        check(onesided_signals_alloc(rt.handle(), name.c_str(), count, &handle_));
    }
    signals(signals &&other) noexcept : handle_(std::exchange(other.handle_, onesided_signals{0})) {}
    signals &operator=(signals &&other) noexcept {
        if (this != &other) {
            reset();
            handle_ = std::exchange(other.handle_, onesided_signals{0});
        }
        return *this;
    }
    signals(const signals &) = delete;
    signals &operator=(const signals &) = delete;
    ~signals() { reset(); }
    /// Frees them now (collective).
    void reset() noexcept {
        if (handle_.id != 0) detail::fatal(onesided_signals_free(&handle_));
    }
    /// Waits until this PE's signal `index` is at least `value`; its value then.
    std::uint64_t wait_ge(std::size_t index, std::uint64_t value) const {
        std::uint64_t seen = 0;
        check(onesided_signal_wait_ge(handle_, index, value, &seen));
        return seen;
    }
    /// This PE's signal `index` now.
    std::uint64_t value(std::size_t index) const {
        std::uint64_t v = 0;
        check(onesided_signal_value(handle_, index, &v));
        return v;
    }
    /// Adds `delta` to PE `pe`'s signal `index`.
    void add(int pe, std::size_t index, std::uint64_t delta) const {
        check(onesided_signal_add(handle_, pe, index, delta));
    }
    /// The C handle.
    onesided_signals handle() const noexcept { return handle_; }

  private:
    onesided_signals handle_{0};
};

/// Bytes with a copy on every PE, at the same offsets.
class symmetric {
  public:
    /// Allocates `bytes` zeroed bytes on every PE. Collective, the same size everywhere.
    symmetric(const runtime &rt, const std::string &name, std::size_t bytes) {
        check(onesided_symmetric_alloc(rt.handle(), name.c_str(), bytes, &handle_));
    }
    symmetric(symmetric &&other) noexcept : handle_(std::exchange(other.handle_, onesided_symmetric{0})) {}
    symmetric &operator=(symmetric &&other) noexcept {
        if (this != &other) {
            reset();
            handle_ = std::exchange(other.handle_, onesided_symmetric{0});
        }
        return *this;
    }
    symmetric(const symmetric &) = delete;
    symmetric &operator=(const symmetric &) = delete;
    ~symmetric() { reset(); }
    /// Frees it now (collective).
    void reset() noexcept {
        if (handle_.id != 0) detail::fatal(onesided_symmetric_free(&handle_));
    }
    /// This PE's copy: remote PEs may write it; read a region after the signal that says so.
    void *data() const {
        void *p = nullptr;
        std::size_t n = 0;
        check(onesided_symmetric_local(handle_, &p, &n));
        return p;
    }
    /// Its size in bytes.
    std::size_t size() const {
        void *p = nullptr;
        std::size_t n = 0;
        check(onesided_symmetric_local(handle_, &p, &n));
        return n;
    }
    /// Copies `bytes` from `src` to PE `pe`'s copy at `offset`.
    void put(int pe, std::size_t offset, const void *src, std::size_t bytes) const {
        check(onesided_put(handle_, pe, offset, src, bytes));
    }
    /// Copies `bytes` of PE `pe`'s copy at `offset` into `dst`.
    void get(int pe, std::size_t offset, void *dst, std::size_t bytes) const {
        check(onesided_get(handle_, pe, offset, dst, bytes));
    }
    /// Puts, then sets PE `pe`'s signal `index` of `sig` to `value`.
    void put_signal(int pe, std::size_t offset, const void *src, std::size_t bytes, const signals &sig,
                    std::size_t index, std::uint64_t value) const {
        check(onesided_put_signal(handle_, pe, offset, src, bytes, sig.handle(), index, value));
    }
    /// The C handle.
    onesided_symmetric handle() const noexcept { return handle_; }

  private:
    onesided_symmetric handle_{0};
};

/// A send-receive channel in MPI_Sendrecv's shape.
class exchange {
  public:
    /// Makes it between this PE and `partners`, for messages of at most `max_message` bytes
    /// to this PE. Collective.
    exchange(const runtime &rt, const std::string &name, path p, const std::vector<int> &partners,
             std::size_t max_message) {
        check(onesided_exchange_new(rt.handle(), name.c_str(), static_cast<onesided_path>(p), partners.data(),
                                    partners.size(), max_message, &handle_));
    }
    exchange(exchange &&other) noexcept : handle_(std::exchange(other.handle_, onesided_exchange{0})) {}
    exchange &operator=(exchange &&other) noexcept {
        if (this != &other) {
            reset();
            handle_ = std::exchange(other.handle_, onesided_exchange{0});
        }
        return *this;
    }
    exchange(const exchange &) = delete;
    exchange &operator=(const exchange &) = delete;
    ~exchange() { reset(); }
    /// Frees it now (collective).
    void reset() noexcept {
        if (handle_.id != 0) detail::fatal(onesided_exchange_free(&handle_));
    }
    /// Sends `send_bytes` from `send` to `dest`, receives from `source` into `recv` (room
    /// for `recv_bytes`); the bytes received.
    std::size_t sendrecv(const void *send, std::size_t send_bytes, int dest, void *recv, std::size_t recv_bytes,
                         int source) {
        std::size_t received = 0;
        check(onesided_exchange_sendrecv(handle_, send, send_bytes, dest, recv, recv_bytes, source, &received));
        return received;
    }
    /// Sends every message of `sends` and receives every one of `receives` in one step; the
    /// bytes each receive got. `repeats`: the next call receives the same messages
    /// (ONESIDED_CALL_REPEATS).
    std::vector<std::size_t> call(const std::vector<onesided_send> &sends,
                                  const std::vector<onesided_receive> &receives, bool repeats = false) {
        std::vector<std::size_t> received(receives.size());
        check(onesided_exchange_call(handle_, sends.data(), sends.size(), receives.data(), receives.size(),
                                     repeats ? ONESIDED_CALL_REPEATS : 0u, received.data()));
        return received;
    }
    /// As call, with the messages packed where they go and unpacked where they landed:
    /// `pack(send, data, bytes)` writes send `send`, `unpack(receive, data, bytes)` reads
    /// receive `receive`, in the order of `receives`. An exception from either is rethrown
    /// after the call (the messages of a throwing pack are then undefined).
    template <class Pack, class Unpack>
    std::vector<std::size_t> call_packed(const std::vector<onesided_message> &sends, Pack &&pack,
                                         const std::vector<onesided_message> &receives, Unpack &&unpack,
                                         bool repeats = false) {
        struct host {
            Pack &pack;
            Unpack &unpack;
            std::exception_ptr error;
        } h{pack, unpack, nullptr};
        auto packs = [](void *context, std::size_t send, void *data, std::size_t bytes) {
            auto *c = static_cast<host *>(context);
            if (c->error) return;
            try {
                c->pack(send, data, bytes);
            } catch (...) {
                c->error = std::current_exception();
            }
        };
        auto unpacks = [](void *context, std::size_t receive, const void *data, std::size_t bytes) {
            auto *c = static_cast<host *>(context);
            if (c->error) return;
            try {
                c->unpack(receive, data, bytes);
            } catch (...) {
                c->error = std::current_exception();
            }
        };
        std::vector<std::size_t> received(receives.size());
        onesided_status status =
            onesided_exchange_call_packed(handle_, sends.data(), sends.size(), packs, receives.data(), receives.size(),
                                          unpacks, &h, repeats ? ONESIDED_CALL_REPEATS : 0u, received.data());
        if (h.error) std::rethrow_exception(h.error);
        check(status);
        return received;
    }
    /// The C handle.
    onesided_exchange handle() const noexcept { return handle_; }

  private:
    onesided_exchange handle_{0};
};

/// A std::vector of per-atom state in home order, which a repartition moves with the atoms
/// and resizes to the new home count.
class atom_vector {
  public:
    template <class T>
    atom_vector(std::vector<T> &v)  // NOLINT: implicit, so that {velocities, types} reads
        : vector_(&v), bytes_(sizeof(T)), data_([](void *p) -> void * { return static_cast<std::vector<T> *>(p)->data(); }),
          size_([](void *p) { return static_cast<std::vector<T> *>(p)->size(); }),
          resize_([](void *p, std::size_t n) { static_cast<std::vector<T> *>(p)->resize(n); }) {}
    /// The C field over the vector as it is.
    onesided_atom_field field() const { return {data_(vector_), bytes_, 0, size_(vector_)}; }
    /// Resizes the vector to `n` entries.
    void resize(std::size_t n) const { resize_(vector_, n); }

  private:
    void *vector_;
    std::size_t bytes_;
    void *(*data_)(void *);
    std::size_t (*size_)(void *);
    void (*resize_)(void *, std::size_t);
};

/// md-halo's halo exchange: move_x, the host's kernel on the view, move_f; between steps the
/// home atoms and repartitions.
class halo {
  public:
    /// The options with their defaults (onesided_halo_options_default).
    static onesided_halo_options default_options() {
        onesided_halo_options o;
        check(onesided_halo_options_default(&o));
        return o;
    }
    /// Builds it from the whole system: `n_atoms` positions in global order (float or
    /// double triples, as `options.real` says), the same on every PE. Collective.
    static halo from_global(const runtime &rt, const std::array<double, 9> &box, double range, const void *positions,
                            std::size_t n_atoms, const onesided_halo_options &options = default_options()) {
        onesided_halo h;
        check(onesided_halo_from_global(rt.handle(), box.data(), range, positions, n_atoms, &options, &h));
        return halo(h);
    }
    /// Builds it from each PE's own home atoms. Collective.
    static halo from_home(const runtime &rt, const std::array<double, 9> &box, double range, const void *positions,
                          const std::uint32_t *globals, std::size_t n_home,
                          const onesided_halo_options &options = default_options()) {
        onesided_halo h;
        check(onesided_halo_from_home(rt.handle(), box.data(), range, positions, globals, n_home, &options, &h));
        return halo(h);
    }
    halo(halo &&other) noexcept : handle_(std::exchange(other.handle_, onesided_halo{0})) {}
    halo &operator=(halo &&other) noexcept {
        if (this != &other) {
            reset();
            handle_ = std::exchange(other.handle_, onesided_halo{0});
        }
        return *this;
    }
    halo(const halo &) = delete;
    halo &operator=(const halo &) = delete;
    ~halo() { reset(); }
    /// Frees it now (collective).
    void reset() noexcept {
        if (handle_.id != 0) detail::fatal(onesided_halo_free(&handle_));
    }
    /// Coordinates out, the halo's in: the step's view until move_f.
    onesided_halo_local move_x() {
        onesided_halo_local local;
        check(onesided_halo_move_x(handle_, &local));
        return local;
    }
    /// Forces back; the shift forces (three vectors, for the virial).
    std::array<double, 9> move_f() {
        std::array<double, 9> shift{};
        check(onesided_halo_move_f(handle_, shift.data()));
        return shift;
    }
    /// The coordinates out, in flight: the home atoms' view, for the home pairs meanwhile.
    onesided_halo_local start_x() {
        onesided_halo_local home;
        check(onesided_halo_start_x(handle_, &home));
        return home;
    }
    /// The halo in: the step's view, as move_x gives it.
    onesided_halo_local finish_x() {
        onesided_halo_local local;
        check(onesided_halo_finish_x(handle_, &local));
        return local;
    }
    /// The forces back, in flight: the home atoms, with those whose forces are final.
    onesided_halo_settled start_f() {
        onesided_halo_settled settled;
        check(onesided_halo_start_f(handle_, &settled));
        return settled;
    }
    /// The returned forces added; the shift forces, as move_f gives them.
    std::array<double, 9> finish_f() {
        std::array<double, 9> shift{};
        check(onesided_halo_finish_f(handle_, shift.data()));
        return shift;
    }
    /// The home atoms between steps.
    onesided_halo_home home() const {
        onesided_halo_home h;
        check(onesided_halo_home_atoms(handle_, &h));
        return h;
    }
    /// Repartitions; each vector follows its atoms and is resized to the new home count.
    /// Collective.
    void repartition(std::initializer_list<atom_vector> state) {
        std::vector<onesided_atom_field> fields;
        for (const atom_vector &v : state) fields.push_back(v.field());
        onesided_status status = onesided_halo_repartition(handle_, fields.data(), fields.size());
        if (status != ONESIDED_OK && onesided_last_error_every_pe()) check(status);
        std::size_t count = home().count;
        if (status != ONESIDED_OK) {
            // The new state did not fit: grow the vectors and take it.
            for (const atom_vector &v : state) v.resize(count);
            fields.clear();
            for (const atom_vector &v : state) fields.push_back(v.field());
            check(onesided_halo_take_fields(handle_, fields.data(), fields.size()));
        }
        for (const atom_vector &v : state) v.resize(count);
    }
    /// The C handle.
    onesided_halo handle() const noexcept { return handle_; }

  private:
    explicit halo(onesided_halo h) : handle_(h) {}
    onesided_halo handle_;
};

/// pme-redist's PME: the redistribution and the mesh.
class pme {
  public:
    /// The options with their defaults (onesided_pme_options_default).
    static onesided_pme_options default_options() {
        onesided_pme_options o;
        check(onesided_pme_options_default(&o));
        return o;
    }
    /// Builds it for this PE's home atoms. Collective.
    pme(const runtime &rt, const std::array<double, 9> &box, const std::vector<onesided_particle> &home,
        const onesided_pme_options &options = default_options()) {
        check(onesided_pme_new(rt.handle(), box.data(), home.data(), home.size(), &options, &handle_));
    }
    pme(pme &&other) noexcept : handle_(std::exchange(other.handle_, onesided_pme{0})) {}
    pme &operator=(pme &&other) noexcept {
        if (this != &other) {
            reset();
            handle_ = std::exchange(other.handle_, onesided_pme{0});
        }
        return *this;
    }
    pme(const pme &) = delete;
    pme &operator=(const pme &) = delete;
    ~pme() { reset(); }
    /// Frees it now (collective).
    void reset() noexcept {
        if (handle_.id != 0) detail::fatal(onesided_pme_free(&handle_));
    }
    /// One step: the reciprocal forces on the home atoms into `forces` (resized to them), the
    /// energy and virial returned. Collective.
    onesided_pme_energy step(const std::vector<onesided_particle> &home, std::vector<std::array<float, 3>> &forces) {
        forces.resize(home.size());
        onesided_pme_energy energy{};
        check(onesided_pme_step(handle_, home.data(), home.size(), forces.empty() ? nullptr : forces[0].data(), &energy));
        return energy;
    }
    /// The redistribution's plan made again for the home atoms now. Collective.
    void plan(const std::vector<onesided_particle> &home) {
        check(onesided_pme_plan(handle_, home.data(), home.size()));
    }
    /// The C handle.
    onesided_pme handle() const noexcept { return handle_; }

  private:
    onesided_pme handle_{0};
};

}  // namespace onesided

#endif  // ONESIDED_HPP
