/*
 * Bad use of the onesided ABI from C, on every PE: each case must give its status and a
 * message naming the PE, never undefined behaviour, a crash or a hang.
 *
 *   abi_misuse calls          the cases a PE can survive, one line "case NAME: STATUS: message"
 *                             each, then "abi_misuse ok: PE p"
 *   abi_misuse thread-level   MPI_Init without MPI_THREAD_MULTIPLE, then attach
 *   abi_misuse partial        a collective only PE 0 calls: the job must end with a message
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onesided.h"

static int me = -1;
static int failures = 0;

/* Checks that `status` is `expect` and that the message holds `word`; prints the case. */
static void expect_case(const char *name, onesided_status status, onesided_status expect,
                        const char *word, int every_pe) {
    const char *message = onesided_last_error();
    int ok = status == expect && strstr(message, word) != NULL &&
             (every_pe < 0 || onesided_last_error_every_pe() == every_pe);
    char pe_prefix[32];
    snprintf(pe_prefix, sizeof pe_prefix, "PE %d: ", me);
    if (status != ONESIDED_OK && strncmp(message, pe_prefix, strlen(pe_prefix)) != 0) ok = 0;
    printf("case %s: %s: %s%s\n", name, onesided_status_name(status), message, ok ? "" : "  <- WRONG");
    if (!ok) failures++;
}

#define CHECK(call)                                                                        \
    do {                                                                                   \
        onesided_status status_ = (call);                                                  \
        if (status_ != ONESIDED_OK) {                                                      \
            fprintf(stderr, "abi_misuse: %s failed: %s\n", #call, onesided_last_error());  \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

static int calls(void) {
    int provided, n;
    MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);

    onesided_runtime rt;
    expect_case("null out", onesided_attach(NULL, NULL), ONESIDED_ERROR_ARGUMENT, "null pointer", 0);
    onesided_runtime none = {0};
    int pe = -1;
    expect_case("no runtime", onesided_my_pe(none, &pe), ONESIDED_ERROR_HANDLE, "null", 0);

    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, me % 2, me, &half);
    if (n > 1) {
        onesided_status sub = onesided_attach(&half, &rt);
        expect_case("sub-communicator", sub, ONESIDED_ERROR_ARGUMENT, "MPI_COMM_WORLD", 0);
    }
    MPI_Comm_free(&half);
    CHECK(onesided_attach(NULL, &rt));
    onesided_runtime second;
    expect_case("attach twice", onesided_attach(NULL, &second), ONESIDED_ERROR_INIT, "already", -1);
    expect_case("init after attach", onesided_init(&second), ONESIDED_ERROR_INIT, "already", -1);
    expect_case("null handle", onesided_barrier(none), ONESIDED_ERROR_HANDLE, "null", 0);

    onesided_symmetric array;
    onesided_signals signals;
    CHECK(onesided_symmetric_alloc(rt, "misuse array", 64, &array));
    CHECK(onesided_signals_alloc(rt, "misuse signals", 2, &signals));
    double data[16] = {0};
    onesided_symmetric unnamed = {99};
    expect_case("null name", onesided_symmetric_alloc(rt, NULL, 64, &unnamed), ONESIDED_ERROR_ARGUMENT,
                "name", 0);
    if (unnamed.id != 0) {
        printf("case null name: the handle of a failed allocation is not {0}  <- WRONG\n");
        failures++;
    }
    expect_case("null source", onesided_put(array, (me + 1) % n, 0, NULL, 8), ONESIDED_ERROR_ARGUMENT,
                "null pointer", 0);
    expect_case("past the end", onesided_put(array, (me + 1) % n, 60, data, 8), ONESIDED_ERROR_ARGUMENT,
                "misuse array", 0);
    expect_case("no such PE", onesided_put(array, n, 0, data, 8), ONESIDED_ERROR_ARGUMENT, "PE", 0);
    expect_case("negative PE", onesided_get(array, -1, 0, data, 8), ONESIDED_ERROR_ARGUMENT,
                "is not a PE", 0);
    expect_case("signal out of range", onesided_signal_add(signals, me, 2, 1), ONESIDED_ERROR_ARGUMENT,
                "misuse signals", 0);
    onesided_symmetric wrong_kind = {signals.id};
    expect_case("wrong kind", onesided_put(wrong_kind, me, 0, data, 8), ONESIDED_ERROR_HANDLE,
                "is a onesided_signals", 0);
    /* Every PE asks for a different size: refused on every PE alike. */
    onesided_symmetric uneven;
    expect_case("sizes differ", onesided_symmetric_alloc(rt, "uneven", 64 + 8 * me, &uneven),
                n > 1 ? ONESIDED_ERROR_HEAP : ONESIDED_OK, n > 1 ? "uneven" : "", n > 1 ? 1 : -1);
    if (n == 1) CHECK(onesided_symmetric_free(&uneven));
    onesided_symmetric freed = array;
    CHECK(onesided_symmetric_free(&array));
    expect_case("use after free", onesided_put(freed, me, 0, data, 8), ONESIDED_ERROR_HANDLE,
                "freed", 0);
    expect_case("free twice", onesided_symmetric_free(&freed), ONESIDED_ERROR_HANDLE, "freed", 0);

    onesided_exchange ex;
    int right = (me + 1) % n, left = (me + n - 1) % n;
    int partners[2] = {left, right};
    expect_case("bad path", onesided_exchange_new(rt, "bad path", 7, partners, 2, 64, &ex),
                ONESIDED_ERROR_ARGUMENT, "ONESIDED_PATH_MPI", 0);
    onesided_path path = -1;
    expect_case("bad path name", onesided_path_from_name("put", &path), ONESIDED_ERROR_ARGUMENT,
                "onesided, mpi or auto", 0);
    if (n > 2) {
        /* PE 0 names only its right neighbour; its left one names it: not mutual. */
        int one_way = me == 0 ? 1 : 2;
        expect_case("not mutual",
                    onesided_exchange_new(rt, "one way", ONESIDED_PATH_ONESIDED, partners + 2 - one_way,
                                          one_way, 64, &ex),
                    ONESIDED_ERROR_COLLECTIVE, "one way", 1);
    }
    CHECK(onesided_exchange_new(rt, "misuse exchange", ONESIDED_PATH_ONESIDED, partners, 2, 64, &ex));
    char out[64] = {0}, in[64];
    if (n > 1) {
        /* Every PE sends 48 bytes where its receiver has room for 16: refused on both sides,
         * nothing written. */
        memset(in, 0x5a, sizeof in);
        expect_case("message too large",
                    onesided_exchange_sendrecv(ex, out, 48, right, in, 16, left, NULL),
                    ONESIDED_ERROR_ARGUMENT, "misuse exchange", -1);
        int untouched = 1;
        for (int i = 0; i < 64; i++) untouched &= in[i] == 0x5a;
        if (!untouched) {
            printf("case message too large: the receive buffer was written  <- WRONG\n");
            failures++;
        }
    }
    expect_case("self needs both", onesided_exchange_sendrecv(ex, out, 8, me, in, 64, n > 1 ? left : -1, NULL),
                ONESIDED_ERROR_ARGUMENT, n > 1 ? "dest == source" : "is not a PE", 0);
    expect_case("null receive", onesided_exchange_sendrecv(ex, out, 8, right, NULL, 64, left, NULL),
                ONESIDED_ERROR_ARGUMENT, "recv", 0);
    {
        /* A call's rooms beyond the inbox, overlapping receives, an unknown flag, messages to
         * itself that do not pair up: refused on this PE before anything moves. */
        static char big[128];
        onesided_send one = {out, 8, right};
        onesided_receive wide[2] = {{big, 40, left}, {big + 40, 32, right}};
        expect_case("rooms beyond the inbox", onesided_exchange_call(ex, &one, 1, wide, 2, 0, NULL),
                    ONESIDED_ERROR_ARGUMENT, n > 1 ? "max_message at least 72" : "pair up", 0);
        onesided_receive overlap[2] = {{in, 16, left}, {in + 8, 16, right}};
        expect_case("overlapping receives", onesided_exchange_call(ex, &one, 1, overlap, 2, 0, NULL),
                    ONESIDED_ERROR_ARGUMENT, "overlap", 0);
        onesided_receive single = {in, 16, left};
        expect_case("unknown flag", onesided_exchange_call(ex, &one, 1, &single, 1, 4, NULL),
                    ONESIDED_ERROR_ARGUMENT, "ONESIDED_CALL_REPEATS", 0);
        onesided_send to_me = {out, 8, me};
        expect_case("self unpaired", onesided_exchange_call(ex, &to_me, 1, NULL, 0, 0, NULL),
                    ONESIDED_ERROR_ARGUMENT, "pair up", 0);
        if (n > 1) {
            /* A call that announced its receives for the next (ONESIDED_CALL_REPEATS), then
             * a next call with another room: refused on every PE before anything moves, and
             * the announced call still goes through. */
            CHECK(onesided_exchange_call(ex, &one, 1, &single, 1, ONESIDED_CALL_REPEATS, NULL));
            onesided_receive other = {in, 32, left};
            expect_case("not the announced receives", onesided_exchange_call(ex, &one, 1, &other, 1, 0, NULL),
                        ONESIDED_ERROR_ARGUMENT, "ONESIDED_CALL_REPEATS: 16 bytes from PE", -1);
            size_t got = 0;
            CHECK(onesided_exchange_call(ex, &one, 1, &single, 1, 0, &got));
            if (got != 8) {
                printf("case not the announced receives: the call after it got %zu bytes, not 8  <- WRONG\n", got);
                failures++;
            }
        }
        onesided_message packed = {8, right};
        expect_case("packed without pack", onesided_exchange_call_packed(ex, &packed, 1, NULL, NULL, 0, NULL, NULL, 0, NULL),
                    ONESIDED_ERROR_ARGUMENT, "pack is null", 0);
        expect_case("packed without unpack", onesided_exchange_call_packed(ex, NULL, 0, NULL, &packed, 1, NULL, NULL, 0, NULL),
                    ONESIDED_ERROR_ARGUMENT, "unpack is null", 0);
        onesided_receive into_send = {out, 16, me};
        expect_case("receive into a send", onesided_exchange_call(ex, &to_me, 1, &into_send, 1, 0, NULL),
                    ONESIDED_ERROR_ARGUMENT, "overlaps sends[0]", 0);
    }
    CHECK(onesided_exchange_free(&ex));

    /* The halo exchange out of order, and a repartition with too little room. */
    enum { SIDE = 6 };
    static float x[SIDE * SIDE * SIDE][3];
    for (int i = 0; i < SIDE * SIDE * SIDE; i++) {
        x[i][0] = 0.6f * (float)(i % SIDE) + 0.3f;
        x[i][1] = 0.6f * (float)(i / SIDE % SIDE) + 0.3f;
        x[i][2] = 0.6f * (float)(i / (SIDE * SIDE)) + 0.3f;
    }
    double box[9] = {3.6, 0, 0, 0, 3.6, 0, 0, 0, 3.6};
    onesided_halo_options options;
    CHECK(onesided_halo_options_default(&options));
    options.real = 7;
    onesided_halo halo;
    expect_case("bad real", onesided_halo_from_global(rt, box, 0.9, x, SIDE * SIDE * SIDE, &options, &halo),
                ONESIDED_ERROR_ARGUMENT, "ONESIDED_REAL_F32", 0);
    options.real = ONESIDED_REAL_F32;
    CHECK(onesided_halo_from_global(rt, box, 0.9, x, SIDE * SIDE * SIDE, &options, &halo));
    expect_case("move_f first", onesided_halo_move_f(halo, NULL), ONESIDED_ERROR_ARGUMENT, "move_x first", 0);
    onesided_halo_local local;
    CHECK(onesided_halo_move_x(halo, &local));
    onesided_halo_home home;
    expect_case("home in a step", onesided_halo_home_atoms(halo, &home), ONESIDED_ERROR_ARGUMENT,
                "move_f first", 0);
    expect_case("move_x twice", onesided_halo_move_x(halo, &local), ONESIDED_ERROR_ARGUMENT, "move_f first", 0);
    CHECK(onesided_halo_move_f(halo, NULL));
    /* The split step, each half in its turn. */
    onesided_halo_settled settled;
    expect_case("start_f first", onesided_halo_start_f(halo, &settled), ONESIDED_ERROR_ARGUMENT, "move_x first", 0);
    expect_case("finish_x first", onesided_halo_finish_x(halo, &local), ONESIDED_ERROR_ARGUMENT, "start_x first", 0);
    expect_case("finish_f first", onesided_halo_finish_f(halo, NULL), ONESIDED_ERROR_ARGUMENT, "start_f first", 0);
    CHECK(onesided_halo_start_x(halo, &local));
    if (local.stored != local.home || local.images != NULL) {
        fprintf(stderr, "PE %d: the home view holds %zu atoms of %zu home\n", me, local.stored, local.home);
        failures++;
    }
    expect_case("move_x in flight", onesided_halo_move_x(halo, &local), ONESIDED_ERROR_ARGUMENT,
                "onesided_halo_finish_x first", 0);
    expect_case("move_f in flight", onesided_halo_move_f(halo, NULL), ONESIDED_ERROR_ARGUMENT,
                "onesided_halo_finish_x first", 0);
    CHECK(onesided_halo_finish_x(halo, &local));
    CHECK(onesided_halo_start_f(halo, &settled));
    expect_case("home in flight", onesided_halo_home_atoms(halo, &home), ONESIDED_ERROR_ARGUMENT,
                "onesided_halo_finish_f first", 0);
    CHECK(onesided_halo_finish_f(halo, NULL));
    CHECK(onesided_halo_home_atoms(halo, &home));
    if (settled.n_atoms + home.n_returning != home.count) {
        fprintf(stderr, "PE %d: %zu settled and %zu returning of %zu home atoms\n", me, settled.n_atoms,
                home.n_returning, home.count);
        failures++;
    }
    onesided_exchange halo_as_exchange = {halo.id};
    expect_case("halo as exchange", onesided_exchange_free(&halo_as_exchange), ONESIDED_ERROR_HANDLE,
                "is a onesided_halo", 0);
    CHECK(onesided_halo_home_atoms(halo, &home));
    /* Every atom moves to the next domain along x: a field with room for none of them. */
    float (*hx)[3] = home.coordinates;
    for (size_t i = 0; i < home.count; i++) hx[i][0] += 3.6f / (float)n;
    /* The tags are one member of an array of structs: a strided field. */
    static struct { float before; uint32_t tag; float after; } tagged[SIDE * SIDE * SIDE];
    for (size_t i = 0; i < SIDE * SIDE * SIDE; i++) tagged[i].before = tagged[i].after = -1.0f;
    for (size_t i = 0; i < home.count; i++) tagged[i].tag = home.globals[i] * 10u + 7u;
    onesided_atom_field field = {&tagged[0].tag, sizeof tagged[0].tag, sizeof tagged[0],
                                 n > 1 ? 0 : SIDE * SIDE * SIDE};
    onesided_status moved = onesided_halo_repartition(halo, &field, 1);
    if (n > 1) {
        expect_case("no room", moved, ONESIDED_ERROR_ARGUMENT, "field 0", 1);
    } else if (moved != ONESIDED_OK) {
        failures++;
    }
    if (n > 1) {
        /* The first check refuses before anything moves; with room for this PE's home atoms
         * the repartition runs, and its state fits the whole array. */
        field.capacity = home.count;
        onesided_status fit = onesided_halo_repartition(halo, &field, 1);
        if (fit != ONESIDED_OK) {
            field.capacity = SIDE * SIDE * SIDE;
            CHECK(onesided_halo_take_fields(halo, &field, 1));
        }
    }
    CHECK(onesided_halo_home_atoms(halo, &home));
    int tags_follow = 1;
    for (size_t i = 0; i < home.count; i++)
        tags_follow &= tagged[i].tag == home.globals[i] * 10u + 7u && tagged[i].before == -1.0f;
    if (!tags_follow) {
        printf("case repartition: a field entry did not follow its atom  <- WRONG\n");
        failures++;
    }
    CHECK(onesided_halo_free(&halo));

    /* The PME with an order out of range, then a step without room for the forces. */
    onesided_pme_options pme_options;
    CHECK(onesided_pme_options_default(&pme_options));
    pme_options.order = 2;
    onesided_particle particles[4];
    for (int i = 0; i < 4; i++) {
        particles[i].x[0] = 0.5f + (float)me;
        particles[i].x[1] = particles[i].x[2] = 0.4f * (float)i + 0.2f;
        particles[i].q = i % 2 ? 0.5f : -0.5f;
        particles[i].global = (uint32_t)(4 * me + i);
    }
    onesided_pme pme;
    expect_case("pme order", onesided_pme_new(rt, box, particles, 4, &pme_options, &pme), ONESIDED_ERROR_ARGUMENT,
                "order", -1);
    pme_options.order = 4;
    CHECK(onesided_pme_new(rt, box, particles, 4, &pme_options, &pme));
    expect_case("pme no forces", onesided_pme_step(pme, particles, 4, NULL, NULL), ONESIDED_ERROR_ARGUMENT,
                "forces", 0);
    CHECK(onesided_pme_free(&pme));

    onesided_runtime stale = rt;
    CHECK(onesided_runtime_free(&rt));
    expect_case("runtime after free", onesided_barrier(stale), ONESIDED_ERROR_HANDLE, "", -1);
    MPI_Finalize();
    if (failures) {
        fprintf(stderr, "abi_misuse: PE %d: %d cases wrong\n", me, failures);
        return 1;
    }
    printf("abi_misuse ok: PE %d\n", me);
    return 0;
}

static int thread_level(void) {
    MPI_Init(NULL, NULL);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    onesided_runtime rt;
    onesided_status status = onesided_attach(NULL, &rt);
    printf("case thread level: %s: %s\n", onesided_status_name(status), onesided_last_error());
    int ok = status == ONESIDED_ERROR_INIT && strstr(onesided_last_error(), "MPI_THREAD_MULTIPLE");
    MPI_Finalize();
    if (!ok) return 1;
    printf("abi_misuse ok: PE %d\n", me);
    return 0;
}

static int partial(void) {
    int provided;
    MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    onesided_runtime rt;
    CHECK(onesided_attach(NULL, &rt));
    if (me == 0) {
        /* The others go straight to the end: PE 0's allocation waits for them in vain. */
        onesided_symmetric alone;
        onesided_status status = onesided_symmetric_alloc(rt, "alone", 64, &alone);
        printf("partial: PE 0's collective returned %s: %s\n", onesided_status_name(status),
               onesided_last_error());
        return 1;
    }
    /* The others block in the runtime's end, which is collective too. */
    onesided_runtime_free(&rt);
    MPI_Finalize();
    return 1;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "calls";
    if (strcmp(mode, "calls") == 0) return calls();
    if (strcmp(mode, "thread-level") == 0) return thread_level();
    if (strcmp(mode, "partial") == 0) return partial();
    fprintf(stderr, "abi_misuse: unknown mode %s: calls, thread-level or partial\n", mode);
    return 2;
}
