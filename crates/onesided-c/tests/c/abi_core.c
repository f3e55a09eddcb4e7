/*
 * A C host of the onesided ABI, as an MD code is: it starts MPI itself with
 * MPI_THREAD_MULTIPLE, attaches the runtime, puts around the ring with signals, sends and
 * receives through an exchange on every path (to its neighbours and to itself), frees what it
 * made, runs PME on every PE and on PE 0 alone, goes on with MPI after the runtime is gone
 * and finalises MPI itself. Every value
 * encodes the PE and the index it came from, so a misplaced byte fails.
 *
 * Prints "abi_core ok: PE p of n" on success; exits 1 with a message naming the check.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onesided.h"

static int me = -1;

#define CHECK(call)                                                                        \
    do {                                                                                   \
        onesided_status status_ = (call);                                                  \
        if (status_ != ONESIDED_OK) {                                                      \
            fprintf(stderr, "abi_core: %s failed with %s: %s\n", #call,                    \
                    onesided_status_name(status_), onesided_last_error());                 \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

#define EXPECT(cond, ...)                                                                  \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "abi_core: PE %d: ", me);                                      \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fprintf(stderr, "\n");                                                         \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

/* The value element i of a message from PE `from` carries on call `call`. */
static double value_of(int from, int i, int call) { return 1e6 * from + 1e3 * call + i; }

static void ring_put_signal(onesided_runtime rt, int n) {
    enum { COUNT = 16 };
    onesided_symmetric inbox;
    onesided_signals arrived;
    CHECK(onesided_symmetric_alloc(rt, "ring inbox", COUNT * sizeof(double), &inbox));
    CHECK(onesided_signals_alloc(rt, "ring arrived", 1, &arrived));
    double message[COUNT];
    for (int i = 0; i < COUNT; i++) message[i] = value_of(me, i, 0);
    int right = (me + 1) % n, left = (me + n - 1) % n;
    CHECK(onesided_put_signal(inbox, right, 0, message, sizeof message, arrived, 0, 1));
    uint64_t seen = 0;
    CHECK(onesided_signal_wait_ge(arrived, 0, 1, &seen));
    EXPECT(seen == 1, "signal %llu, not 1", (unsigned long long)seen);
    void *local;
    size_t bytes;
    CHECK(onesided_symmetric_local(inbox, &local, &bytes));
    EXPECT(bytes == sizeof message, "the inbox has %zu bytes", bytes);
    const double *got = local;
    for (int i = 0; i < COUNT; i++)
        EXPECT(got[i] == value_of(left, i, 0), "ring element %d is %.0f, not from PE %d", i, got[i], left);
    /* A get of the right neighbour's inbox gives what this PE put there. */
    double back[COUNT];
    CHECK(onesided_barrier(rt));
    CHECK(onesided_get(inbox, right, 0, back, sizeof back));
    EXPECT(memcmp(back, message, sizeof back) == 0, "the get from PE %d differs", right);
    CHECK(onesided_barrier(rt));
    CHECK(onesided_signals_free(&arrived));
    CHECK(onesided_symmetric_free(&inbox));
    EXPECT(inbox.id == 0 && arrived.id == 0, "freed handles are not {0}");
}

/* The packed calls' messages: send s carries value_of(me, i, call) times SCALE[s]; receive r
 * expects SCALE[r] times its sender's values (forward from the left, backward from the right,
 * the copy to itself), and notes the order it was unpacked in. */
static const double SCALE[3] = {1.0, -1.0, 0.5};

typedef struct {
    int call, left, right, unpacked, order[3], wrong;
    size_t bytes[3];
} packed_state;

static int packed_count(int from, int call) { return 1 + (from * 5 + call * 11) % 64; }

static void pack_values(void *context, size_t send, void *data, size_t bytes) {
    packed_state *state = context;
    double *out = data;
    for (size_t i = 0; i < bytes / sizeof(double); i++) out[i] = SCALE[send] * value_of(me, (int)i, state->call);
}

static void unpack_values(void *context, size_t receive, const void *data, size_t bytes) {
    packed_state *state = context;
    int from = receive == 0 ? state->left : receive == 1 ? state->right : me;
    const double *in = data;
    for (size_t i = 0; i < bytes / sizeof(double); i++)
        if (in[i] != SCALE[receive] * value_of(from, (int)i, state->call)) state->wrong++;
    state->bytes[receive] = bytes;
    if (state->unpacked < 3) state->order[state->unpacked] = (int)receive;
    state->unpacked++;
}

static void exchange_on(onesided_runtime rt, int n, onesided_path path, const char *name) {
    enum { MAX = 64 };
    int right = (me + 1) % n, left = (me + n - 1) % n;
    int partners[2] = {left, right};
    onesided_exchange ex;
    CHECK(onesided_exchange_new(rt, name, path, partners, 2, MAX * sizeof(double), &ex));
    for (int call = 0; call < 5; call++) {
        /* Forward to the right, then backward to the left, as CoMD's two faces of an axis;
         * message lengths differ per PE and call, so a count mix-up shows. */
        double out[MAX], in[MAX];
        int count = 1 + (me * 7 + call * 3) % MAX;
        for (int i = 0; i < count; i++) out[i] = value_of(me, i, call);
        size_t received = 0;
        CHECK(onesided_exchange_sendrecv(ex, out, count * sizeof(double), right, in, sizeof in, left,
                                         &received));
        int expect = 1 + (left * 7 + call * 3) % MAX;
        EXPECT(received == expect * sizeof(double), "%s call %d: %zu bytes from PE %d, not %d", name,
               call, received, left, (int)(expect * sizeof(double)));
        for (int i = 0; i < expect; i++)
            EXPECT(in[i] == value_of(left, i, call), "%s call %d: element %d from PE %d is %.0f", name,
                   call, i, left, in[i]);
        CHECK(onesided_exchange_sendrecv(ex, out, count * sizeof(double), left, in, sizeof in, right,
                                         &received));
        expect = 1 + (right * 7 + call * 3) % MAX;
        EXPECT(received == expect * sizeof(double), "%s call %d backward: %zu bytes", name, call,
               received);
        for (int i = 0; i < expect; i++)
            EXPECT(in[i] == value_of(right, i, call), "%s call %d backward: element %d", name, call, i);
        /* To this PE itself: a copy. */
        CHECK(onesided_exchange_sendrecv(ex, out, count * sizeof(double), me, in, sizeof in, me,
                                         &received));
        EXPECT(received == count * sizeof(double) && memcmp(in, out, received) == 0,
               "%s: the message to itself differs", name);
    }
    CHECK(onesided_exchange_free(&ex));

    /* Both faces and the message to itself in one call, announced ahead for the next call
     * (ONESIDED_CALL_REPEATS) but the last: rooms of two messages from other PEs. */
    char calls_name[64];
    snprintf(calls_name, sizeof calls_name, "%s calls", name);
    CHECK(onesided_exchange_new(rt, calls_name, path, partners, 2, 2 * MAX * sizeof(double), &ex));
    for (int call = 0; call < 6; call++) {
        double fwd[MAX], bwd[MAX], self[MAX], from_left[MAX], from_right[MAX], mine[MAX];
        int count = 1 + (me * 5 + call * 11) % MAX;
        for (int i = 0; i < count; i++) {
            fwd[i] = value_of(me, i, call);
            bwd[i] = -value_of(me, i, call);
            self[i] = value_of(me, i, call + 100);
        }
        onesided_send sends[3] = {{fwd, count * sizeof(double), right},
                                  {bwd, (count / 2) * sizeof(double), left},
                                  {self, count * sizeof(double), me}};
        /* In this order also on 1 PE, where left and right are this PE: the k-th message to
         * a PE meets the k-th received from it. */
        onesided_receive receives[3] = {{from_left, sizeof from_left, left},
                                        {from_right, sizeof from_right, right},
                                        {mine, sizeof mine, me}};
        size_t got[3] = {9, 9, 9};
        CHECK(onesided_exchange_call(ex, sends, 3, receives, 3, call < 5 ? ONESIDED_CALL_REPEATS : 0, got));
        int from_l = 1 + (left * 5 + call * 11) % MAX, from_r = (1 + (right * 5 + call * 11) % MAX) / 2;
        EXPECT(got[2] == count * sizeof(double) && memcmp(mine, self, got[2]) == 0,
               "%s call %d: the message to itself differs", calls_name, call);
        EXPECT(got[0] == from_l * sizeof(double), "%s call %d: %zu bytes from the left PE %d, not %d",
               calls_name, call, got[0], left, (int)(from_l * sizeof(double)));
        EXPECT(got[1] == from_r * sizeof(double), "%s call %d: %zu bytes from the right PE %d, not %d",
               calls_name, call, got[1], right, (int)(from_r * sizeof(double)));
        for (int i = 0; i < from_l; i++)
            EXPECT(from_left[i] == value_of(left, i, call), "%s call %d: element %d from PE %d is %.0f",
                   calls_name, call, i, left, from_left[i]);
        for (int i = 0; i < from_r; i++)
            EXPECT(from_right[i] == -value_of(right, i, call), "%s call %d: element %d from PE %d is %.0f",
                   calls_name, call, i, right, from_right[i]);
    }
    /* The same messages packed where they go and unpacked where they landed, on the same
     * exchange, announced ahead but for the last; unpacked in the order of the receives. */
    for (int call = 0; call < 6; call++) {
        packed_state state = {call, left, right, 0, {-1, -1, -1}, 0, {0, 0, 0}};
        int count = packed_count(me, call);
        onesided_message sends[3] = {{count * sizeof(double), right},
                                     {(count / 2) * sizeof(double), left},
                                     {count * sizeof(double), me}};
        onesided_message receives[3] = {{MAX * sizeof(double), left},
                                        {MAX * sizeof(double), right},
                                        {MAX * sizeof(double), me}};
        size_t got[3] = {9, 9, 9};
        CHECK(onesided_exchange_call_packed(ex, sends, 3, pack_values, receives, 3, unpack_values, &state,
                                            call < 5 ? ONESIDED_CALL_REPEATS : 0, got));
        size_t want[3] = {packed_count(left, call) * sizeof(double),
                          (packed_count(right, call) / 2) * sizeof(double), count * sizeof(double)};
        EXPECT(state.unpacked == 3 && state.order[0] == 0 && state.order[1] == 1 && state.order[2] == 2,
               "%s packed call %d: unpacked %d receives in the order %d %d %d, not 0 1 2", calls_name, call,
               state.unpacked, state.order[0], state.order[1], state.order[2]);
        EXPECT(state.wrong == 0, "%s packed call %d: %d values not from their senders", calls_name, call,
               state.wrong);
        for (int r = 0; r < 3; r++)
            EXPECT(got[r] == want[r] && state.bytes[r] == want[r],
                   "%s packed call %d: receive %d got %zu bytes (unpacked %zu), not %zu", calls_name, call, r,
                   got[r], state.bytes[r], want[r]);
    }
    CHECK(onesided_exchange_free(&ex));
}

/* PME on every PE and on PE 0 alone (GROMACS's -npme 1, so PE 0 holds no atoms): the same
 * energy and forces to rounding, the energy the same on every PE. */
static void pme_subset(onesided_runtime rt, int n) {
    if (n < 2) return;
    enum { PER_PE = 6 };
    size_t count = me == 0 ? 0 : PER_PE;
    double box[9] = {2.5, 0, 0, 0, 2.5, 0, 0, 0, 2.5};
    onesided_particle home[PER_PE];
    for (int i = 0; i < PER_PE; i++) {
        int g = me * PER_PE + i;
        home[i].x[0] = 0.1f + 2.3f * (float)((g * 7) % 23) / 23.0f;
        home[i].x[1] = 0.1f + 2.3f * (float)((g * 11) % 29) / 29.0f;
        home[i].x[2] = 0.1f + 2.3f * (float)((g * 13) % 31) / 31.0f;
        home[i].q = g % 2 ? 0.4f : -0.4f;
        home[i].global = (uint32_t)g;
    }
    onesided_pme_options options;
    CHECK(onesided_pme_options_default(&options));
    float all[PER_PE][3], one[PER_PE][3];
    onesided_pme_energy e_all, e_one;
    onesided_pme pme;
    CHECK(onesided_pme_new(rt, box, home, count, &options, &pme));
    CHECK(onesided_pme_step(pme, home, count, &all[0][0], &e_all));
    CHECK(onesided_pme_free(&pme));
    int only[1] = {0};
    options.pme_pes = only;
    options.n_pme_pes = 1;
    CHECK(onesided_pme_new(rt, box, home, count, &options, &pme));
    CHECK(onesided_pme_step(pme, home, count, &one[0][0], &e_one));
    CHECK(onesided_pme_free(&pme));
    double scale = e_all.energy < 0 ? -e_all.energy : e_all.energy;
    double diff = e_all.energy - e_one.energy;
    EXPECT(scale > 0 && (diff < 0 ? -diff : diff) <= 1e-9 * scale, "PME energy %.12g on every PE, %.12g on PE 0",
           e_all.energy, e_one.energy);
    double first = e_one.energy;
    double agreed = 0;
    MPI_Allreduce(&first, &agreed, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    EXPECT(agreed == first, "the PME energy differs between PEs");
    for (size_t i = 0; i < count; i++)
        for (int k = 0; k < 3; k++) {
            float d = all[i][k] - one[i][k], m = all[i][k] < 0 ? -all[i][k] : all[i][k];
            EXPECT((d < 0 ? -d : d) <= 1e-4f * (m + 1.0f), "PME force %zu,%d: %g on every PE, %g on PE 0", i, k,
                   all[i][k], one[i][k]);
        }
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm world = MPI_COMM_WORLD;

    onesided_runtime rt;
    CHECK(onesided_attach(&world, &rt));
    int pe, n;
    CHECK(onesided_my_pe(rt, &pe));
    CHECK(onesided_n_pes(rt, &n));
    EXPECT(pe == me && n == size, "PE %d of %d on rank %d of %d", pe, n, me, size);

    ring_put_signal(rt, n);
    onesided_path paths[3];
    CHECK(onesided_path_from_name("onesided", &paths[0]));
    CHECK(onesided_path_from_name("mpi", &paths[1]));
    CHECK(onesided_path_from_name("auto", &paths[2]));
    EXPECT(paths[0] == ONESIDED_PATH_ONESIDED && paths[1] == ONESIDED_PATH_MPI &&
               paths[2] == ONESIDED_PATH_AUTO,
           "path names give %d %d %d", paths[0], paths[1], paths[2]);
    exchange_on(rt, n, ONESIDED_PATH_ONESIDED, "core onesided");
    exchange_on(rt, n, ONESIDED_PATH_MPI, "core mpi");
    exchange_on(rt, n, ONESIDED_PATH_AUTO, "core auto");
    pme_subset(rt, n);

    /* An object left alive is freed with the runtime. */
    onesided_symmetric left_alive;
    CHECK(onesided_symmetric_alloc(rt, "left alive", 1024, &left_alive));
    CHECK(onesided_runtime_free(&rt));
    EXPECT(rt.id == 0, "the freed runtime is not {0}");

    /* The program's MPI after the runtime, then its own end. */
    int sum = 0;
    MPI_Allreduce(&me, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    EXPECT(sum == size * (size - 1) / 2, "the program's sum after the runtime is %d", sum);
    MPI_Finalize();
    printf("abi_core ok: PE %d of %d\n", me, size);
    return 0;
}
