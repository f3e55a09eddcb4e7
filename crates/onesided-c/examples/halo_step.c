/*
 * examples/halo_step.rs in C, through onesided.h: the loop an MD engine writes around the
 * halo exchange, with the halo in flight while the kernel computes. Build once, then every
 * step the coordinates out while the kernel computes the home pairs (start_x, finish_x), the
 * pairs with halo atoms, the forces back while the atoms in no neighbour's halo move
 * (start_f, finish_f), then the rest; a repartition every ten steps takes the velocities
 * along. A Lennard-Jones fluid on a lattice; the kernel writes straight into the exchange's
 * force array, from which the halo forces go back without a copy. Each atom's forces are
 * summed in the order of one loop over the pairs i < j, so the bits are those of the
 * blocking step (move_x, the kernel, move_f) that the C++ version runs.
 *
 *   mpicc -std=c99 -ffp-contract=off halo_step.c $(pkg-config --cflags --libs onesided)
 *   scripts/pe-run -n 2 ./halo_step [onesided|mpi|auto]
 *
 * Each PE ends with the line the Rust example prints, its fingerprint the same bit for bit
 * (no fused multiply-adds: -ffp-contract=off keeps each operation rounded as Rust does).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "onesided.h"

enum { SIDE = 10 };                 /* atoms per box edge */
static const float SPACING = 0.37f; /* nm */
static const float CUTOFF = 0.8f;   /* nm; the pair list's buffer below widens the halo's range */
static const float RANGE = 0.9f;
static const float DT = 0.002f;   /* ps */
static const float C6 = 6.2e-3f;  /* kJ mol^-1 nm^6 (argon) */
static const float C12 = 9.7e-6f; /* kJ mol^-1 nm^12 */
static const float MASS = 39.948f; /* g mol^-1 */

static onesided_runtime rt = {0};

static void check(onesided_status status, const char *what) {
    if (status == ONESIDED_OK) return;
    fprintf(stderr, "halo_step: %s: %s\n", what, onesided_last_error());
    onesided_abort(rt, 1, NULL);
}

/* The force of the pair i, j within the cutoff, added to i and taken from j. */
static void pair(const float (*x)[3], float (*f)[3], size_t i, size_t j) {
    float d[3] = {x[i][0] - x[j][0], x[i][1] - x[j][1], x[i][2] - x[j][2]};
    float r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
    if (r2 >= CUTOFF * CUTOFF) return;
    float inv6 = 1.0f / (r2 * r2 * r2);
    float scale = (12.0f * C12 * inv6 - 6.0f * C6) * inv6 / r2;
    for (int k = 0; k < 3; k++) {
        f[i][k] += scale * d[k];
        f[j][k] -= scale * d[k];
    }
}

/* The pairs of home atoms (all this domain's), into the home forces cleared first. */
static void home_pairs(const onesided_halo_local *home) {
    const float (*x)[3] = home->coordinates;
    float (*f)[3] = home->forces;
    for (size_t i = 0; i < home->stored; i++) f[i][0] = f[i][1] = f[i][2] = 0.0f;
    for (size_t i = 0; i < home->stored; i++)
        for (size_t j = i + 1; j < home->stored; j++) pair(x, f, i, j);
}

/* The pairs with a halo atom this domain owns, halo atom by halo atom, added to what the home
 * pairs left. */
static void halo_pairs(const onesided_halo_local *local) {
    const float (*x)[3] = local->coordinates;
    float (*f)[3] = local->forces;
    for (size_t i = local->home; i < local->stored; i++) f[i][0] = f[i][1] = f[i][2] = 0.0f;
    for (size_t j = local->home; j < local->stored; j++)
        for (size_t i = 0; i < j; i++)
            if (onesided_halo_owns(local->zones[i], local->zones[j])) pair(x, f, i, j);
}

/* A kick and a drift for each of `n` home atoms `atoms`. */
static void advance(float (*x)[3], float (*v)[3], const float (*f)[3], const uint32_t *atoms, size_t n) {
    for (size_t a = 0; a < n; a++) {
        uint32_t i = atoms[a];
        for (int d = 0; d < 3; d++) {
            v[i][d] += DT * f[i][d] / MASS;
            x[i][d] += DT * v[i][d];
        }
    }
}

/* `value` as Rust's {:.3e} writes it ("8.986e-3"), so that the lines match the Rust example's. */
static const char *rust_exp(double value, char *text, size_t room) {
    char c[32];
    snprintf(c, sizeof c, "%.3e", value);
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
    onesided_halo_options options;
    check(onesided_halo_options_default(&options), "options");
    if (argc > 1) check(onesided_path_from_name(argv[1], &options.path), "the path");

    float edge = (float)SIDE * SPACING;
    double box[9] = {edge, 0, 0, 0, edge, 0, 0, 0, edge};
    enum { N = SIDE * SIDE * SIDE };
    static float positions[N][3];
    for (int i = 0; i < N; i++) {
        int c[3] = {i % SIDE, i / SIDE % SIDE, i / (SIDE * SIDE)};
        for (int k = 0; k < 3; k++) positions[i][k] = ((float)c[k] + 0.5f) * SPACING;
    }
    onesided_halo halo;
    check(onesided_halo_from_global(rt, box, RANGE, positions, N, &options, &halo), "the halo");

    /* Per-atom state the engine keeps in home order: it migrates at every repartition. */
    static float velocities[N][3];
    onesided_halo_home home;
    check(onesided_halo_home_atoms(halo, &home), "home");
    for (size_t i = 0; i < home.count; i++) {
        velocities[i][0] = 0.05f * (float)(i % 7) - 0.15f;
        velocities[i][1] = velocities[i][2] = 0.0f;
    }
    onesided_atom_field fields[1] = {{velocities, sizeof velocities[0], 0, N}};
    for (int step = 1; step <= 50; step++) {
        onesided_halo_local view;
        check(onesided_halo_start_x(halo, &view), "start_x");
        home_pairs(&view); /* while the halo's coordinates travel */
        check(onesided_halo_finish_x(halo, &view), "finish_x");
        halo_pairs(&view);
        onesided_halo_settled settled;
        check(onesided_halo_start_f(halo, &settled), "start_f");
        advance(settled.coordinates, velocities, settled.forces, settled.atoms, settled.n_atoms);
        double shift_forces[9]; /* for the virial */
        check(onesided_halo_finish_f(halo, shift_forces), "finish_f");
        check(onesided_halo_home_atoms(halo, &home), "home");
        advance(home.coordinates, velocities, home.forces, home.returning, home.n_returning);
        if (step % 10 == 0) check(onesided_halo_repartition(halo, fields, 1), "repartition");
    }

    check(onesided_halo_home_atoms(halo, &home), "home");
    size_t halo_atoms = home.local - home.count;
    const float (*f)[3] = home.forces;
    const float (*x)[3] = home.coordinates;
    double net = 0.0;
    uint64_t hash = 0xcbf29ce484222325ull; /* FNV-1a, a word at a time, as onesided::Fnv1a */
    for (size_t i = 0; i < home.count; i++) {
        net += (double)f[i][0];
        uint32_t bits[3];
        for (int k = 0; k < 3; k++) {
            union { float f; uint32_t u; } pun = {x[i][k]};
            bits[k] = pun.u;
        }
        uint64_t words[4] = {home.globals[i], bits[0], bits[1], bits[2]};
        for (int w = 0; w < 4; w++) hash = (hash ^ words[w]) * 0x100000001b3ull;
    }
    int pe;
    check(onesided_my_pe(rt, &pe), "my_pe");
    char net_text[64];
    printf("PE %d: %zu home atoms, %zu halo; net x force on them %s; fingerprint %016llx\n", pe,
           home.count, halo_atoms, rust_exp(net, net_text, sizeof net_text), (unsigned long long)hash);
    check(onesided_runtime_free(&rt), "the end");
    MPI_Finalize();
    return 0;
}
