/*
 * examples/pme_step.rs in C, through onesided.h: the loop an MD engine writes around the PME
 * mesh. Every step the home atoms go to the PME ranks that own their part of the mesh, the
 * mesh spreads their charges, transforms, solves and gathers the forces, and each PE gets its
 * home atoms' reciprocal forces back in home order (onesided_pme_step). The plan is rebuilt
 * every ten steps, as at a repartition. Charges on a lattice, every PE a PME rank.
 *
 *   mpicc -std=c99 -ffp-contract=off pme_step.c $(pkg-config --cflags --libs onesided)
 *   scripts/pe-run -n 2 ./pme_step [onesided|mpi|auto]
 *
 * Each PE ends with the line the Rust example prints, energy and fingerprint the same bit for
 * bit.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "onesided.h"

enum { SIDE = 12 };                 /* charges per box edge */
static const float SPACING = 0.31f; /* nm */
static const float DT = 0.002f;     /* ps */
static const float MASS = 20.0f;    /* g mol^-1 */

static onesided_runtime rt = {0};

static void check(onesided_status status, const char *what) {
    if (status == ONESIDED_OK) return;
    fprintf(stderr, "pme_step: %s: %s\n", what, onesided_last_error());
    onesided_abort(rt, 1, NULL);
}

/* `value` as Rust's {:.9e} writes it ("-1.234567890e2"). */
static const char *rust_exp(double value, char *text, size_t room) {
    char c[40];
    snprintf(c, sizeof c, "%.9e", value);
    char *e = c;
    while (*e && *e != 'e') e++;
    int exponent = atoi(e + 1);
    *e = '\0';
    snprintf(text, room, "%se%d", c, exponent);
    return text;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    check(onesided_attach(NULL, &rt), "onesided_attach");
    int me, n;
    check(onesided_my_pe(rt, &me), "my_pe");
    check(onesided_n_pes(rt, &n), "n_pes");
    onesided_pme_options options;
    check(onesided_pme_options_default(&options), "options"); /* 0.12 nm, order 4, 0.9 nm, 1e-5 */
    if (argc > 1) check(onesided_path_from_name(argv[1], &options.path), "the path");

    float edge = (float)SIDE * SPACING;
    double box[9] = {edge, 0, 0, 0, edge, 0, 0, 0, edge};
    /* This PE's home atoms: a share of a lattice of alternating charges. */
    enum { TOTAL = SIDE * SIDE * SIDE };
    size_t first = (size_t)me * TOTAL / (size_t)n, last = (size_t)(me + 1) * TOTAL / (size_t)n;
    size_t count = last - first;
    onesided_particle *home = malloc(count * sizeof *home);
    float (*forces)[3] = calloc(count, sizeof *forces);
    float (*velocities)[3] = calloc(count, sizeof *velocities);
    if (!home || !forces || !velocities) onesided_abort(rt, 1, "out of memory");
    for (size_t i = 0; i < count; i++) {
        size_t g = first + i;
        size_t c[3] = {g % SIDE, g / SIDE % SIDE, g / (SIDE * SIDE)};
        home[i].q = (c[0] + c[1] + c[2]) % 2 == 0 ? 0.5f : -0.5f;
        for (int k = 0; k < 3; k++) home[i].x[k] = ((float)c[k] + 0.5f) * SPACING;
        home[i].global = (uint32_t)g;
    }
    onesided_pme pme;
    check(onesided_pme_new(rt, box, home, count, &options, &pme), "the PME");
    onesided_pme_energy energy = {0};
    for (int step = 1; step <= 30; step++) {
        check(onesided_pme_step(pme, home, count, &forces[0][0], &energy), "the step");
        for (size_t i = 0; i < count; i++) {
            for (int d = 0; d < 3; d++) {
                velocities[i][d] += DT * forces[i][d] / MASS;
                home[i].x[d] += DT * velocities[i][d];
            }
        }
        if (step % 10 == 0) check(onesided_pme_plan(pme, home, count), "the plan");
    }
    uint64_t hash = 0xcbf29ce484222325ull; /* FNV-1a, a word at a time, as onesided::Fnv1a */
    for (size_t i = 0; i < count; i++) {
        uint64_t words[4] = {home[i].global, 0, 0, 0};
        for (int k = 0; k < 3; k++) {
            union { float f; uint32_t u; } pun = {home[i].x[k]};
            words[k + 1] = pun.u;
        }
        for (int w = 0; w < 4; w++) hash = (hash ^ words[w]) * 0x100000001b3ull;
    }
    char text[64];
    printf("PE %d: %zu home atoms; energy %s; fingerprint %016llx\n", me, count,
           rust_exp(energy.energy, text, sizeof text), (unsigned long long)hash);
    free(velocities);
    free(forces);
    free(home);
    check(onesided_runtime_free(&rt), "the end");
    MPI_Finalize();
    return 0;
}
