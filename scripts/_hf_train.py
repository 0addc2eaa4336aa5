"""Training worker used by ``scripts/make_sample_logs.py``.

Trains a tiny causal LM (Mamba or Llama) with the real ``transformers.Trainer``
on CPU over deterministic synthetic token sequences, reporting to TensorBoard
and Weights & Biases (offline) by default (``--report-to``).  It is meant to be
launched as a subprocess (plain ``python`` or ``torchrun``) whose stdout+stderr
go to one log file, so the output looks exactly like a training job's console
log.  It works with transformers 5.x and with 4.45 (the pre-4.46 release used
for the ``hf_v4_accum4`` run).

Not a library module: run it through ``make_sample_logs.py``.
"""

from __future__ import annotations

import argparse

SEQ_LEN = 64
VOCAB_SIZE = 256


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", choices=["mamba", "llama"], required=True)
    p.add_argument("--output-dir", required=True)
    p.add_argument("--run-name", required=True)
    p.add_argument("--per-device-train-batch-size", type=int, required=True)
    p.add_argument("--gradient-accumulation-steps", type=int, required=True)
    p.add_argument("--max-steps", type=int, required=True)
    p.add_argument("--logging-steps", type=int, required=True)
    p.add_argument("--eval-steps", type=int, required=True)
    p.add_argument("--save-steps", type=int, required=True)
    p.add_argument("--save-total-limit", type=int, default=None)
    p.add_argument("--learning-rate", type=float, default=3e-3)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--lr-scheduler-type", default="linear")
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--optim", default=None, help="TrainingArguments.optim (default: its own)")
    p.add_argument("--disable-tqdm", action="store_true", help="no progress bar in the log")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--num-train-samples", type=int, default=1024)
    p.add_argument("--num-eval-samples", type=int, default=64)
    p.add_argument("--include-num-input-tokens-seen", default="no")
    p.add_argument(
        "--report-to",
        default="tensorboard,wandb",
        help="comma-separated TrainingArguments.report_to integrations",
    )
    p.add_argument("--resume", action="store_true", help="resume_from_checkpoint=True")
    p.add_argument(
        "--ignore-data-skip",
        action="store_true",
        help="TrainingArguments(ignore_data_skip=True): on resume, start from the first batch instead of "
        "fast-forwarding the dataloader",
    )
    p.add_argument(
        "--crash-at-step",
        type=int,
        default=None,
        help="crash (uncaught exception) right after global step N has been logged/evaluated/saved",
    )
    return p.parse_args(argv)


class SyntheticSequences:
    """Deterministic token sequences with learnable structure.

    Each sequence is an arithmetic progression modulo VOCAB_SIZE with a random
    start token and a stride drawn from a small set; 5% of positions are
    replaced by random noise tokens.  A model that infers the stride from the
    prefix can predict the rest, so the loss goes down quickly.  Every sequence
    is exactly SEQ_LEN tokens long (no padding).
    """

    def __init__(self, n: int, seed: int):
        import torch

        g = torch.Generator().manual_seed(seed)
        starts = torch.randint(0, VOCAB_SIZE, (n, 1), generator=g)
        strides = torch.randint(1, 9, (n, 1), generator=g)
        pos = torch.arange(SEQ_LEN).unsqueeze(0)
        seqs = (starts + strides * pos) % VOCAB_SIZE
        noise_mask = torch.rand(n, SEQ_LEN, generator=g) < 0.05
        noise = torch.randint(0, VOCAB_SIZE, (n, SEQ_LEN), generator=g)
        self.data = torch.where(noise_mask, noise, seqs).long()

    def __len__(self):
        return self.data.shape[0]

    def __getitem__(self, i):
        ids = self.data[i]
        return {"input_ids": ids, "labels": ids.clone(), "attention_mask": ids.new_ones(ids.shape)}


def build_model(kind: str):
    if kind == "mamba":
        from transformers import MambaConfig, MambaForCausalLM

        config = MambaConfig(
            vocab_size=VOCAB_SIZE,
            hidden_size=64,
            state_size=8,
            num_hidden_layers=2,
            expand=2,
            conv_kernel=4,
            pad_token_id=0,
            bos_token_id=0,
            eos_token_id=0,
        )
        return MambaForCausalLM(config)
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=SEQ_LEN,
        pad_token_id=0,
        bos_token_id=0,
        eos_token_id=0,
    )
    return LlamaForCausalLM(config)


def main(argv=None):
    args = parse_args(argv)

    import transformers
    from transformers import Trainer, TrainerCallback, TrainingArguments, set_seed

    transformers.logging.set_verbosity_info()

    class CrashAtStep(TrainerCallback):
        """Crash the training process once global step N is fully logged/evaluated/saved.

        Raises an uncaught exception at the start of step N+1 (like a NaN guard,
        a device error or an OOM RuntimeError would).  A SIGKILL is not used on
        purpose: with wandb 0.31 the wandb-core service shuts down without
        flushing when its parent is SIGKILLed, leaving a header-only .wandb file.
        """

        def __init__(self, step: int):
            self.step = step

        def on_step_begin(self, targs, state, control, **kwargs):
            if state.global_step == self.step:
                raise RuntimeError(
                    f"simulated crash after global step {state.global_step} (--crash-at-step {self.step})"
                )

    set_seed(args.seed)
    model = build_model(args.model)
    train_ds = SyntheticSequences(args.num_train_samples, seed=1234)
    eval_ds = SyntheticSequences(args.num_eval_samples, seed=5678)

    targs = TrainingArguments(
        output_dir=args.output_dir,
        run_name=args.run_name,
        per_device_train_batch_size=args.per_device_train_batch_size,
        per_device_eval_batch_size=8,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        max_steps=args.max_steps,
        learning_rate=args.learning_rate,
        warmup_steps=args.warmup_steps,
        lr_scheduler_type=args.lr_scheduler_type,
        weight_decay=args.weight_decay,
        **({"optim": args.optim} if args.optim else {}),
        logging_steps=args.logging_steps,
        eval_strategy="steps",
        eval_steps=args.eval_steps,
        save_strategy="steps",
        save_steps=args.save_steps,
        save_total_limit=args.save_total_limit,
        report_to=args.report_to.split(","),
        log_level="info",
        disable_tqdm=args.disable_tqdm,
        seed=args.seed,
        use_cpu=True,
        dataloader_num_workers=0,
        # transformers 4.x takes a bool here (the string "no" would be truthy); 5.x maps False to "no".
        include_num_input_tokens_seen=(
            False if args.include_num_input_tokens_seen == "no" else args.include_num_input_tokens_seen
        ),
        ignore_data_skip=args.ignore_data_skip,
    )

    callbacks = [CrashAtStep(args.crash_at_step)] if args.crash_at_step else None
    trainer = Trainer(
        model=model,
        args=targs,
        train_dataset=train_ds,
        eval_dataset=eval_ds,
        callbacks=callbacks,
    )
    trainer.train(resume_from_checkpoint=True if args.resume else None)
    trainer.save_model()
    trainer.save_state()


if __name__ == "__main__":
    main()
