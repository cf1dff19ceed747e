// RemovedOnSignal (output_file.hpp): the temporaries a signal must not leave behind. mpirun and srun end the
// ranks of a job with SIGTERM (then SIGKILL), a user with SIGINT, a closed terminal with SIGHUP: the handler
// removes every registered file when the signal ends the process, and lets the signal do what it would have
// done without it.
#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <mutex>
#include <utility>

#include "gridshard/io/output_file.hpp"

namespace gridshard::io {
namespace {

// A fixed table, so that the handler touches no allocator and no lock: a slot is free, being filled, or armed.
// A slot's path is written before it is armed and it is freed before it is reused, so a signal on the thread
// that registers never sees half a path (outputs are registered from one thread).
enum SlotState : int { free_slot = 0, filling = 1, armed = 2 };
struct Slot {
    std::atomic<int> state{free_slot};
    char path[PATH_MAX] = {};
};
constexpr std::size_t slot_count = 64;
std::array<Slot, slot_count> slots;

constexpr std::array<int, 5> ending_signals = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGXCPU};
std::array<struct sigaction, ending_signals.size()> previous{};

// Only where the signal ends the process: a handler of the program's own may let the run go on (Python's
// SIGINT raises KeyboardInterrupt later, a batch job may catch a warning SIGTERM), and the run's writer then
// still needs its temporaries; it removes them itself if it fails.
void remove_registered_files() noexcept {
    for (Slot& slot : slots) {
        if (slot.state.load(std::memory_order_acquire) == armed) {
            ::unlink(slot.path);
        }
    }
}

void remove_registered(int signal_number, siginfo_t* info, void* context) {
    const int saved_errno = errno;
    for (std::size_t k = 0; k < ending_signals.size(); ++k) {
        if (ending_signals[k] != signal_number) {
            continue;
        }
        const struct sigaction& before = previous[k];
        if ((before.sa_flags & SA_SIGINFO) != 0 && before.sa_sigaction != nullptr) {
            before.sa_sigaction(signal_number, info, context);  // a handler of the program's own (Python's)
        } else if (before.sa_handler != SIG_DFL && before.sa_handler != SIG_IGN) {
            before.sa_handler(signal_number);
        } else {
            // The default action (ending the process), exactly as without this handler: the signal is blocked
            // while it is handled, so it is delivered again once this returns.
            remove_registered_files();
            ::sigaction(signal_number, &before, nullptr);
            ::raise(signal_number);
        }
    }
    errno = saved_errno;
}

void install_once() {
    static std::once_flag once;
    std::call_once(once, [] {
        for (std::size_t k = 0; k < ending_signals.size(); ++k) {
            struct sigaction action {};
            action.sa_sigaction = remove_registered;
            action.sa_flags = SA_SIGINFO | SA_RESTART;
            sigemptyset(&action.sa_mask);
            if (::sigaction(ending_signals[k], nullptr, &previous[k]) == 0 && previous[k].sa_handler != SIG_IGN) {
                ::sigaction(ending_signals[k], &action, nullptr);  // an ignored signal stays ignored
            }
        }
    });
}

}  // namespace

RemovedOnSignal::RemovedOnSignal(const std::string& path) {
    if (path.empty() || path.size() >= PATH_MAX) {
        return;
    }
    install_once();
    for (std::size_t k = 0; k < slot_count; ++k) {
        int expected = free_slot;
        if (slots[k].state.compare_exchange_strong(expected, filling, std::memory_order_acq_rel)) {
            std::memcpy(slots[k].path, path.c_str(), path.size() + 1);
            slots[k].state.store(armed, std::memory_order_release);
            slot_ = static_cast<int>(k);
            return;
        }
    }
    // Every slot taken (more than 64 outputs at once): this one is left to the next run (output_file.hpp).
}

RemovedOnSignal::~RemovedOnSignal() {
    release();
}

RemovedOnSignal::RemovedOnSignal(RemovedOnSignal&& other) noexcept : slot_(std::exchange(other.slot_, -1)) {}

RemovedOnSignal& RemovedOnSignal::operator=(RemovedOnSignal&& other) noexcept {
    if (this != &other) {
        release();
        slot_ = std::exchange(other.slot_, -1);
    }
    return *this;
}

void RemovedOnSignal::release() noexcept {
    if (slot_ >= 0) {
        slots[static_cast<std::size_t>(std::exchange(slot_, -1))].state.store(free_slot, std::memory_order_release);
    }
}

}  // namespace gridshard::io
