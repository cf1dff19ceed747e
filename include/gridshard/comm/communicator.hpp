#pragma once
/// @file
/// A move-only RAII MPI communicator with an explicit ownership flag.
///
/// @code
///   void groups(int color, int key) {
///       gridshard::Communicator world = gridshard::Communicator::world();   // borrowed, never freed
///       gridshard::Communicator mine = world.duplicate();                   // owned, freed on destruction
///       gridshard::Communicator rows = mine.split(color, key);              // owned
///   }
/// @endcode

#include <mpi.h>

namespace gridshard {

/// An MPI communicator. Owned communicators are freed on destruction; borrowed ones (a caller's,
/// e.g. from mpi4py, or MPI_COMM_WORLD) never are. Move-only: no collective hides behind `=`.
/// Communicators this class creates return MPI errors as codes, which gridshard turns into MpiError.
class Communicator {
  public:
    /// MPI_COMM_WORLD, borrowed. No MPI communication.
    [[nodiscard]] static Communicator world();
    /// Wraps a caller's communicator without taking ownership. No MPI communication.
    [[nodiscard]] static Communicator borrow(MPI_Comm comm);
    /// Takes ownership of `comm`, which is freed on destruction. No MPI communication.
    [[nodiscard]] static Communicator adopt(MPI_Comm comm);

    Communicator(Communicator&& other) noexcept;
    Communicator& operator=(Communicator&& other) noexcept;
    Communicator(const Communicator&) = delete;
    Communicator& operator=(const Communicator&) = delete;
    ~Communicator();

    /// A new owned communicator over the same ranks, returning errors as codes.
    /// Collective over this communicator.
    [[nodiscard]] Communicator duplicate() const;
    /// MPI_Comm_split: ranks with the same `color` form a new owned communicator, ordered by `key`.
    /// Collective over this communicator.
    [[nodiscard]] Communicator split(int color, int key) const;
    /// MPI_Comm_split_type(MPI_COMM_TYPE_SHARED): the ranks that share this rank's memory (its node), as a
    /// new owned communicator ordered as in this one. Collective over this communicator.
    [[nodiscard]] Communicator split_shared_memory() const;
    /// Blocks until every rank of this communicator arrives. Collective over this communicator.
    void barrier() const;

    /// This rank's rank in the communicator. No MPI communication.
    [[nodiscard]] int rank() const noexcept { return rank_; }
    /// The number of ranks. No MPI communication.
    [[nodiscard]] int size() const noexcept { return size_; }
    /// The underlying handle, still owned by this object.
    [[nodiscard]] MPI_Comm native() const noexcept { return comm_; }
    /// Whether this object frees the communicator on destruction.
    [[nodiscard]] bool owns() const noexcept { return owned_; }

  private:
    Communicator(MPI_Comm comm, bool owned);
    void release() noexcept;

    MPI_Comm comm_ = MPI_COMM_NULL;
    bool owned_ = false;
    int rank_ = 0;
    int size_ = 0;
};

}  // namespace gridshard
