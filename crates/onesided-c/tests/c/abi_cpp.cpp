// A C++ host of onesided.hpp: RAII handles and exceptions over the C ABI. It starts MPI
// itself, attaches, sends around the ring on every path (values encoding sender, call and
// index), puts with a signal, catches the errors of bad calls as onesided::error with their
// status, lets the destructors free everything, and finalises MPI itself.
//
// Prints "abi_cpp ok: PE p of n" on success; exits 1 naming the check that failed.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "onesided.hpp"

namespace {

int me = -1;

void expect(bool ok, const char *what) {
    if (!ok) {
        std::fprintf(stderr, "abi_cpp: PE %d: %s\n", me, what);
        std::exit(1);
    }
}

double value_of(int from, int i, int call) { return 1e6 * from + 1e3 * call + i; }

void ring(const onesided::runtime &rt, onesided::path path, const char *name) {
    int n = rt.n_pes();
    int right = (me + 1) % n, left = (me + n - 1) % n;
    onesided::exchange ex(rt, name, path, {left, right}, 32 * sizeof(double));
    for (int call = 0; call < 4; call++) {
        std::vector<double> out(1 + (me + call) % 32), in(32);
        for (std::size_t i = 0; i < out.size(); i++) out[i] = value_of(me, int(i), call);
        std::size_t got = ex.sendrecv(out.data(), out.size() * sizeof(double), right, in.data(),
                                      in.size() * sizeof(double), left);
        std::size_t expect_count = 1 + (left + call) % 32;
        expect(got == expect_count * sizeof(double), "a message of the wrong size");
        for (std::size_t i = 0; i < expect_count; i++)
            expect(in[i] == value_of(left, int(i), call), "a value not from the left neighbour");
    }
    // Both ways in one call, announced ahead for the next.
    onesided::exchange both(rt, std::string(name) + " both ways", path, {left, right}, 64 * sizeof(double));
    for (int call = 0; call < 4; call++) {
        std::vector<double> fwd(1 + (me + call) % 32, value_of(me, 0, call)), bwd(32, -value_of(me, 1, call));
        std::vector<double> from_left(32), from_right(32);
        auto got = both.call({{fwd.data(), fwd.size() * sizeof(double), right}, {bwd.data(), bwd.size() * sizeof(double), left}},
                             {{from_left.data(), 32 * sizeof(double), left}, {from_right.data(), 32 * sizeof(double), right}},
                             call < 3);
        expect(got.size() == 2 && got[0] == (1 + (left + call) % 32) * sizeof(double) && got[1] == 32 * sizeof(double),
               "messages of the wrong size in a call");
        expect(from_left[0] == value_of(left, 0, call) && from_right[31] == -value_of(right, 1, call),
               "a value not from its neighbour in a call");
    }
    // Packed where they go, unpacked where they landed, in the order of the receives.
    for (int call = 0; call < 4; call++) {
        std::vector<int> order;
        double first[2] = {0, 0};
        auto got = both.call_packed(
            {{8 * sizeof(double), right}, {4 * sizeof(double), left}},
            [&](std::size_t send, void *data, std::size_t bytes) {
                auto *out = static_cast<double *>(data);
                for (std::size_t i = 0; i < bytes / sizeof(double); i++)
                    out[i] = (send == 0 ? 1 : -1) * value_of(me, int(i), call);
            },
            {{32 * sizeof(double), left}, {32 * sizeof(double), right}},
            [&](std::size_t receive, const void *data, std::size_t) {
                order.push_back(int(receive));
                first[receive] = static_cast<const double *>(data)[0];
            },
            call < 3);
        expect(got.size() == 2 && got[0] == 8 * sizeof(double) && got[1] == 4 * sizeof(double),
               "packed messages of the wrong size");
        expect(order.size() == 2 && order[0] == 0 && order[1] == 1, "packed messages unpacked out of order");
        expect(first[0] == value_of(left, 0, call) && first[1] == -value_of(right, 0, call),
               "a packed value not from its neighbour");
    }
}

}  // namespace

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    {
        MPI_Comm world = MPI_COMM_WORLD;
        onesided::runtime rt = onesided::runtime::attach(&world);
        expect(rt.my_pe() == me, "the PE is not the rank");
        ring(rt, onesided::path::onesided, "cpp onesided");
        ring(rt, onesided::path::mpi, "cpp mpi");
        ring(rt, onesided::path_from_name("auto"), "cpp auto");

        int n = rt.n_pes();
        onesided::symmetric inbox(rt, "cpp inbox", 8 * sizeof(std::uint64_t));
        onesided::signals arrived(rt, "cpp arrived", 1);
        std::uint64_t message[8];
        for (int i = 0; i < 8; i++) message[i] = 1000u * unsigned(me) + unsigned(i);
        inbox.put_signal((me + 1) % n, 0, message, sizeof message, arrived, 0, 1);
        expect(arrived.wait_ge(0, 1) == 1, "the signal did not arrive");
        auto *got = static_cast<const std::uint64_t *>(inbox.data());
        int left = (me + n - 1) % n;
        for (int i = 0; i < 8; i++) expect(got[i] == 1000u * unsigned(left) + unsigned(i), "a put from elsewhere");
        rt.barrier();

        // Bad calls throw, with the status and a message naming the PE.
        try {
            inbox.put(n, 0, message, 8);
            expect(false, "a put to no PE did not throw");
        } catch (const onesided::error &e) {
            expect(e.status() == ONESIDED_ERROR_ARGUMENT && !e.every_pe(), "a put to no PE: wrong status");
            char prefix[32];
            std::snprintf(prefix, sizeof prefix, "PE %d: ", me);
            expect(std::strncmp(e.what(), prefix, std::strlen(prefix)) == 0, "the message does not name the PE");
        }
        try {
            onesided::path_from_name("put");
            expect(false, "a bad path name did not throw");
        } catch (const onesided::error &e) {
            expect(e.status() == ONESIDED_ERROR_ARGUMENT, "a bad path name: wrong status");
        }
        try {
            onesided::symmetric uneven(rt, "cpp uneven", 64 + 8 * std::size_t(me));
            expect(n == 1, "sizes that differ did not throw");
        } catch (const onesided::error &e) {
            expect(e.status() == ONESIDED_ERROR_HEAP && e.every_pe(), "sizes that differ: wrong status");
        }
        // Moved handles free once: the moved-from object is empty.
        onesided::signals moved = std::move(arrived);
        expect(arrived.handle().id == 0 && moved.handle().id != 0, "a move did not empty its source");
    }  // destructors: signals, symmetric, runtime, in that order
    // The program's MPI after the runtime is gone.
    int sum = 0, size = 0;
    MPI_Allreduce(&me, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    expect(sum == size * (size - 1) / 2, "the program's sum after the runtime");
    MPI_Finalize();
    std::printf("abi_cpp ok: PE %d\n", me);
    return 0;
}
