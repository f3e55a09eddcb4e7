// examples/pme_step.rs in C++, through onesided.hpp (RAII handles, exceptions): every step
// the home atoms go to the PME ranks, the mesh runs there, and the reciprocal forces come
// back in home order; the plan is rebuilt every ten steps. Charges on a lattice, every PE a
// PME rank.
//
//   mpicxx -std=c++17 -ffp-contract=off pme_step.cpp $(pkg-config --cflags --libs onesided)
//   scripts/pe-run -n 2 ./pme_step_cpp [onesided|mpi|auto]
//
// Each PE ends with the line the Rust example prints, energy and fingerprint the same bit for
// bit.
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

constexpr std::size_t SIDE = 12;  // charges per box edge
constexpr float SPACING = 0.31f;  // nm
constexpr float DT = 0.002f;      // ps
constexpr float MASS = 20.0f;     // g mol^-1

// `value` as Rust's {:.9e} writes it ("-1.234567890e2").
std::string rust_exp(double value) {
    char c[48];
    std::snprintf(c, sizeof c, "%.9e", value);
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
        std::size_t me = std::size_t(rt.my_pe()), n = std::size_t(rt.n_pes());
        auto options = onesided::pme::default_options();  // 0.12 nm, order 4, 0.9 nm, 1e-5
        if (argc > 1) options.path = static_cast<onesided_path>(onesided::path_from_name(argv[1]));
        float edge = float(SIDE) * SPACING;
        std::array<double, 9> box = {edge, 0, 0, 0, edge, 0, 0, 0, edge};
        // This PE's home atoms: a share of a lattice of alternating charges.
        std::size_t total = SIDE * SIDE * SIDE;
        std::vector<onesided_particle> home;
        for (std::size_t g = me * total / n; g < (me + 1) * total / n; g++) {
            std::size_t c[3] = {g % SIDE, g / SIDE % SIDE, g / (SIDE * SIDE)};
            onesided_particle p;
            p.q = (c[0] + c[1] + c[2]) % 2 == 0 ? 0.5f : -0.5f;
            for (int k = 0; k < 3; k++) p.x[k] = (float(c[k]) + 0.5f) * SPACING;
            p.global = std::uint32_t(g);
            home.push_back(p);
        }
        onesided::pme mesh(rt, box, home, options);
        std::vector<std::array<float, 3>> forces, velocities(home.size(), {0.0f, 0.0f, 0.0f});
        onesided_pme_energy energy{};
        for (int step = 1; step <= 30; step++) {
            energy = mesh.step(home, forces);
            for (std::size_t i = 0; i < home.size(); i++) {
                for (int d = 0; d < 3; d++) {
                    velocities[i][d] += DT * forces[i][d] / MASS;
                    home[i].x[d] += DT * velocities[i][d];
                }
            }
            if (step % 10 == 0) mesh.plan(home);
        }
        std::uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a, a word at a time, as onesided::Fnv1a
        for (const auto &p : home)
            for (std::uint64_t w : {std::uint64_t(p.global), std::uint64_t(bits(p.x[0])), std::uint64_t(bits(p.x[1])),
                                    std::uint64_t(bits(p.x[2]))})
                hash = (hash ^ w) * 0x100000001b3ull;
        std::printf("PE %zu: %zu home atoms; energy %s; fingerprint %016" PRIx64 "\n", me, home.size(),
                    rust_exp(energy.energy).c_str(), hash);
    } catch (const onesided::error &e) {
        std::fprintf(stderr, "pme_step: %s\n", e.what());
        if (!e.every_pe()) onesided::abort(1);
        MPI_Finalize();
        return 1;
    }
    MPI_Finalize();
    return 0;
}
