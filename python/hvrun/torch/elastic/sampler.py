"""ElasticSampler: a data sampler that survives membership changes in the middle of an epoch."""
import math

import torch
import torch.utils.data

from hvrun.torch.basics import rank as _rank
from hvrun.torch.basics import size as _size


def epoch_order(num_items, epoch, seed=0, shuffle=True):
    """The order of the dataset's indices in `epoch`: the same on every rank and in every
    process, so that ranks that joined late agree with the rest."""
    if not shuffle:
        return list(range(num_items))
    generator = torch.Generator()
    generator.manual_seed(seed + epoch)
    return torch.randperm(num_items, generator=generator).tolist()


def partition_indices(num_items, processed, epoch, rank, size, seed=0, shuffle=True):
    """Rank `rank`'s share (of `size` ranks) of the indices not yet in `processed` this epoch.

    The remaining indices keep the epoch's order; as torch's DistributedSampler does, the list
    is padded by repeating its first indices up to a multiple of `size`, so every rank gets the
    same count (ceil(remaining / size)) and the ranks step together; rank r takes every size-th
    index starting at r. Padding makes at most size - 1 samples appear twice per partition."""
    if size < 1 or not 0 <= rank < size:
        raise ValueError("partition_indices: rank %r out of range for size %r" % (rank, size))
    processed = processed if isinstance(processed, (set, frozenset)) else set(processed)
    remaining = [i for i in epoch_order(num_items, epoch, seed, shuffle) if i not in processed]
    if not remaining:
        return []
    per_rank = int(math.ceil(len(remaining) / size))
    total = per_rank * size
    padded = list(remaining)
    while len(padded) < total:  # fewer left than ranks: repeat as often as needed
        padded.extend(remaining[:total - len(padded)])
    return padded[rank:total:size]


class ElasticSampler(torch.utils.data.Sampler):
    """Horovod's ElasticSampler: splits the samples this epoch has not processed yet among the
    ranks of the current membership.

    Record what each rank has processed (record_batch() after each batch, or record_indices());
    hold the sampler in the TorchState (`hvd.elastic.TorchState(model, optimizer,
    sampler=sampler)`) so that commits save the processed indices and a sync merges every
    rank's into one set. After a reset the remaining samples are split among the new ranks:
    within an epoch no sample is skipped and none is repeated, apart from the padding that
    gives every rank the same number of samples (see partition_indices).

    Call set_epoch(epoch + 1) at the END of an epoch, not at its start: it forgets the
    processed indices, so calling it at the top of a training function that a reset re-enters
    would process the interrupted epoch's samples again. Shuffling is deterministic in
    (seed, epoch)."""

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_indices = set()
        self.rank = 0
        self.num_replicas = 1
        self.indices = []
        self.num_samples = 0
        self.reset()

    def set_epoch(self, epoch):
        """Starts epoch `epoch`: nothing processed yet, a new order."""
        self.epoch = epoch
        self.processed_indices = set()
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Records that this rank processed batch `batch_idx` (counted from the start of the
        current iteration over the sampler, i.e. since the last set_epoch() or reset) of
        `batch_size` samples."""
        self.record_indices(self.get_indices(batch_idx, batch_size))

    def record_indices(self, indices):
        """Records that this rank processed these dataset indices."""
        self.processed_indices.update(int(i) for i in indices)

    def get_indices(self, batch_idx, batch_size):
        """The dataset indices of this rank's batch `batch_idx` in the current partition."""
        start = batch_idx * batch_size
        return self.indices[start:min(start + batch_size, len(self.indices))]

    def state_dict(self):
        return {"epoch": self.epoch, "processed_indices": set(self.processed_indices)}

    def load_state_dict(self, state_dict):
        """Takes the epoch and processed indices, and splits the rest among the current ranks."""
        self.epoch = state_dict["epoch"]
        self.processed_indices = set(state_dict["processed_indices"])
        self.reset()

    def reset(self, rank=None, num_replicas=None):
        """Recomputes this rank's share for the current membership (hvd.rank(), hvd.size());
        `rank` and `num_replicas` override them (to inspect another rank's share)."""
        self.rank = _rank() if rank is None else rank
        self.num_replicas = _size() if num_replicas is None else num_replicas
        self.indices = partition_indices(len(self.dataset), self.processed_indices, self.epoch,
                                         self.rank, self.num_replicas, self.seed, self.shuffle)
        self.num_samples = len(self.indices)

    def __iter__(self):
        return iter(list(self.indices))

    def __len__(self):
        return self.num_samples
