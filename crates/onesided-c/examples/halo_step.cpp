// examples/halo_step.rs in C++, through onesided.hpp (RAII handles, exceptions): the loop an
// MD engine writes around the halo exchange. Build once, then every step move_x, the force
// kernel on the step's view, move_f, and the motion of the home atoms, with a repartition
// every ten steps that takes the velocities along (a std::vector the wrapper resizes).
//
//   mpicxx -std=c++17 -ffp-contract=off halo_step.cpp $(pkg-config --cflags --libs onesided)
//   scripts/pe-run -n 2 ./halo_step_cpp [onesided|mpi|auto]
//
// Each PE ends with the line the Rust example prints, its fingerprint the same bit for bit.
#include <mpi.h>

#include <array>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "onesided.hpp"

namespace {

constexpr int SIDE = 10;          // atoms per box edge
constexpr float SPACING = 0.37f;  // nm
constexpr float CUTOFF = 0.8f;    // nm; the pair list's buffer below widens the halo's range
constexpr float RANGE = 0.9f;
constexpr float DT = 0.002f;       // ps
constexpr float C6 = 6.2e-3f;      // kJ mol^-1 nm^6 (argon)
constexpr float C12 = 9.7e-6f;     // kJ mol^-1 nm^12
constexpr float MASS = 39.948f;    // g mol^-1

using rvec = std::array<float, 3>;

// The forces of the pairs this domain owns, within the cutoff, on both atoms.
void lennard_jones(const onesided_halo_local &local) {
    auto x = static_cast<const rvec *>(local.coordinates);
    auto f = static_cast<rvec *>(local.forces);
    for (std::size_t i = 0; i < local.stored; i++) f[i] = {0.0f, 0.0f, 0.0f};
    for (std::size_t i = 0; i < local.stored; i++) {
        for (std::size_t j = i + 1; j < local.stored; j++) {
            rvec d = {x[i][0] - x[j][0], x[i][1] - x[j][1], x[i][2] - x[j][2]};
            float r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
            if (r2 >= CUTOFF * CUTOFF || !onesided_halo_owns(local.zones[i], local.zones[j])) continue;
            float inv6 = 1.0f / (r2 * r2 * r2);
            float scale = (12.0f * C12 * inv6 - 6.0f * C6) * inv6 / r2;
            for (int k = 0; k < 3; k++) {
                f[i][k] += scale * d[k];
                f[j][k] -= scale * d[k];
            }
        }
    }
}

// `value` as Rust's {:.3e} writes it ("8.986e-3").
std::string rust_exp(double value) {
    char c[40];
    std::snprintf(c, sizeof c, "%.3e", value);
    char *e = std::strchr(c, 'e');
    int exponent = std::atoi(e + 1);
    *e = '\0';
    return std::string(c) + "e" + std::to_string(exponent);
}

std::uint32_t bits(float v) {
    std::uint32_t u;
    std::memcpy(&u, &v, sizeof u);
    return u;
}

}  // namespace

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    try {
        auto rt = onesided::runtime::attach();
        auto options = onesided::halo::default_options();
        if (argc > 1) options.path = static_cast<onesided_path>(onesided::path_from_name(argv[1]));
        float edge = float(SIDE) * SPACING;
        std::array<double, 9> box = {edge, 0, 0, 0, edge, 0, 0, 0, edge};
        std::vector<rvec> positions(SIDE * SIDE * SIDE);
        for (int i = 0; i < SIDE * SIDE * SIDE; i++) {
            int c[3] = {i % SIDE, i / SIDE % SIDE, i / (SIDE * SIDE)};
            for (int k = 0; k < 3; k++) positions[i][k] = (float(c[k]) + 0.5f) * SPACING;
        }
        auto halo = onesided::halo::from_global(rt, box, RANGE, positions.data(), positions.size(), options);
        // Per-atom state the engine keeps in home order: it migrates at every repartition.
        std::vector<rvec> velocities(halo.home().count);
        for (std::size_t i = 0; i < velocities.size(); i++) velocities[i] = {0.05f * float(i % 7) - 0.15f, 0.0f, 0.0f};
        for (int step = 1; step <= 50; step++) {
            lennard_jones(halo.move_x());
            auto shift_forces = halo.move_f();  // for the virial
            (void)shift_forces;
            auto home = halo.home();
            auto x = static_cast<rvec *>(home.coordinates);
            auto f = static_cast<const rvec *>(home.forces);
            for (std::size_t i = 0; i < home.count; i++) {
                for (int d = 0; d < 3; d++) {
                    velocities[i][d] += DT * f[i][d] / MASS;
                    x[i][d] += DT * velocities[i][d];
                }
            }
            if (step % 10 == 0) halo.repartition({velocities});
        }
        auto home = halo.home();
        auto x = static_cast<const rvec *>(home.coordinates);
        auto f = static_cast<const rvec *>(home.forces);
        double net = 0.0;
        std::uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a, a word at a time, as onesided::Fnv1a
        for (std::size_t i = 0; i < home.count; i++) {
            net += double(f[i][0]);
            for (std::uint64_t w : {std::uint64_t(home.globals[i]), std::uint64_t(bits(x[i][0])),
                                    std::uint64_t(bits(x[i][1])), std::uint64_t(bits(x[i][2]))})
                hash = (hash ^ w) * 0x100000001b3ull;
        }
        std::printf("PE %d: %zu home atoms, %zu halo; net x force on them %s; fingerprint %016" PRIx64 "\n", rt.my_pe(),
                    home.count, home.local - home.count, rust_exp(net).c_str(), hash);
    } catch (const onesided::error &e) {
        std::fprintf(stderr, "halo_step: %s\n", e.what());
        if (!e.every_pe()) onesided::abort(1);
        MPI_Finalize();
        return 1;
    }
    MPI_Finalize();
    return 0;
}
