"""Write servewatch's example datasets (``tui/data/datasets/``): SYNTHETIC conversations for trying ``--dataset``.

Every sentence below was written for servewatch; nothing is copied from a public dataset. The conversations are
assembled from these pieces with a fixed seed, so running this script again writes the same bytes:

    python3 tools/make_example_datasets.py            # rewrites both files
    python3 tools/make_example_datasets.py --check    # exit 1 if the committed files differ from what it writes

- ``example-chat.jsonl``: JSON Lines of chat messages (``{"messages": [...]}``), 60 conversations of 1-4 user turns,
  each user turn followed by an assistant answer (its length is the turn's answer length), a system prompt in about
  half of them; lengths from a few words to ~1,500 words (so a small ``--max-context`` skips a few). Line 1 is a
  ``{"_comment": ...}`` row (not a dataset row: skipped, not counted).
- ``example-sharegpt.json``: the same kind of conversations in the ShareGPT layout (a JSON list of
  ``{"conversations": [{"from": "human"|"gpt"|"system", "value": ...}]}``), 20 of them, after a comment item.

After changing this script, run it and update ``EXAMPLE_SHA256`` in tui/sources/load/dataset.py (the unit tests
say which value they expect).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tui" / "data" / "datasets"
SEED = 23

COMMENT = ("servewatch example dataset: SYNTHETIC conversations written for servewatch by "
           "tools/make_example_datasets.py (seed 23), for trying --dataset; not real user traffic. "
           "Rows whose keys all start with '_' are comments, skipped by servewatch.")

SYSTEMS = [
    "You are a patient assistant for a small bakery. Answer briefly and mention prices only when asked.",
    "You help people plan weekend trips by train. Prefer concrete suggestions over general advice.",
    "You are a careful code reviewer. Point out bugs first, style second, and keep each point short.",
    "You answer questions about houseplants. When unsure, say so and suggest what to observe.",
    "You are a tutor for secondary-school physics. Explain with one everyday example per answer.",
    "You are the help desk of a community library. Be friendly and name the shelf or service involved.",
]

TOPICS: dict[str, dict[str, list[str]]] = {
    "bakery": {
        "ask": [
            "Which of your breads keeps best for three or four days?",
            "Can I order a birthday cake without nuts for Saturday?",
            "What is the difference between your rye loaf and the sourdough?",
            "Do you have anything sweet that is not too heavy for an afternoon meeting?",
        ],
        "follow": [
            "And how should I store it so the crust stays crisp?",
            "Could you write that down as a short list for my colleague?",
            "What would you pair with it for guests who do not eat dairy?",
        ],
        "say": [
            "A dense rye loaf stays moist the longest because the crumb holds water well.",
            "Wrap the bread in a cotton cloth rather than plastic if you want to keep the crust firm.",
            "Cakes without nuts are baked on a separate morning so the trays stay clean.",
            "For a meeting, small fruit tarts travel well and are easy to share.",
            "Sourdough has a tangier taste and a more open crumb than the rye.",
            "Slices freeze well; toast them straight from the freezer.",
        ],
    },
    "trains": {
        "ask": [
            "I have two free days and a rail pass. Where could I go from the capital without changing trains more than once?",
            "Is it better to travel on Friday evening or early Saturday morning?",
            "Which coastal towns are reachable in under three hours?",
            "How early should I book seats for a holiday weekend?",
        ],
        "follow": [
            "What if it rains the whole weekend?",
            "Can you suggest a cheaper option for the return trip?",
            "Is there anything worth seeing near the station itself?",
        ],
        "say": [
            "An early Saturday train is usually quieter and gives you a full first day.",
            "Coastal towns on the main line are the easiest; the branch lines run less often at weekends.",
            "Seat reservations open weeks ahead and the popular trains fill first on holiday weekends.",
            "If it rains, pick a town with a covered market or a museum close to the station.",
            "Returning on a slower regional train is often cheaper and not much longer.",
            "Many stations have a small map of walks that start right outside the entrance.",
        ],
    },
    "code": {
        "ask": [
            "Here is a function that sums a list but returns the wrong value for an empty list. What is wrong?",
            "Is it a problem to open a file in a loop without closing it?",
            "My test passes alone but fails when the whole suite runs. Where should I look?",
            "Should I catch every exception in this request handler?",
        ],
        "follow": [
            "How would you write a test that catches that?",
            "Is there a simpler way to do the same thing?",
            "What would you name that helper function?",
        ],
        "say": [
            "The accumulator starts from the first element instead of zero, so an empty list raises an error.",
            "Each open file holds a descriptor; in a long loop you can run out of them.",
            "A test that fails only in the suite usually depends on state another test left behind.",
            "Catching everything hides real bugs; catch the errors you can handle and let the rest surface.",
            "A small test with an empty input and a one-element input would have shown the problem.",
            "A context manager closes the file even when an error is raised inside the block.",
        ],
    },
    "plants": {
        "ask": [
            "The leaves of my fern are turning brown at the tips. What am I doing wrong?",
            "How often should a cactus on a sunny windowsill be watered in winter?",
            "Can I put a basil plant and a mint plant in the same pot?",
            "Why does my orchid grow roots out of the pot?",
        ],
        "follow": [
            "Should I move it to another room?",
            "How will I know if it is getting better?",
            "Is it safe for a cat that likes to chew leaves?",
        ],
        "say": [
            "Brown tips often mean the air is dry; a tray of wet pebbles under the pot can help.",
            "In winter a cactus rests and needs water only every few weeks.",
            "Mint spreads quickly and will crowd out the basil, so separate pots are kinder.",
            "Orchid roots reaching out of the pot are normal; they take moisture from the air.",
            "New growth that stays green for a couple of weeks is the best sign of recovery.",
            "Check each plant's name against a pet safety list before leaving it within reach.",
        ],
    },
    "physics": {
        "ask": [
            "Why does a spoon in hot tea get warm at the handle?",
            "What is the difference between mass and weight?",
            "Why do we see lightning before we hear thunder?",
            "How can a heavy ship float when a small stone sinks?",
        ],
        "follow": [
            "Can you give me a question to check that I understood?",
            "What would change on the Moon?",
            "How would I measure that at home?",
        ],
        "say": [
            "Heat travels along the metal by conduction, from the hot end toward the cool end.",
            "Mass is how much matter there is; weight is the force gravity puts on that mass.",
            "Light travels far faster than sound, so the flash arrives almost at once and the sound later.",
            "A ship pushes aside a large volume of water, and the water pushes back up with a matching force.",
            "On the Moon your mass is the same but your weight is about a sixth of what it is here.",
            "Counting the seconds between flash and sound gives a rough distance to the storm.",
        ],
    },
    "library": {
        "ask": [
            "Can I renew a book online if someone else has reserved it?",
            "Do you lend anything besides books?",
            "Where can I find newspapers from ten years ago?",
            "Is there a quiet room I can book for a study group?",
        ],
        "follow": [
            "Do I need my card with me for that?",
            "What are the opening hours on Sunday?",
            "Can my child get a card too?",
        ],
        "say": [
            "A reserved book cannot be renewed, but you can join the queue for it again.",
            "The library also lends board games, tools for small repairs and a few musical instruments.",
            "Older newspapers are kept on microfilm in the reading room on the first floor.",
            "Group rooms can be booked at the front desk for up to three hours at a time.",
            "Children can have their own card with a parent's signature.",
            "Bring your card or the number on it; the desk can look you up otherwise.",
        ],
    },
}

TOPIC_OF_SYSTEM = ["bakery", "trains", "code", "plants", "physics", "library"]

NOTES_INTRO = [
    "I wrote down some notes about this over the last weeks. Please read them and tell me what stands out:",
    "Below is a long description of my situation. Summarise it in three sentences, then answer my question:",
    "Here is everything I know so far, in no particular order:",
]


def _para(rng: random.Random, topic: str, sentences: int) -> str:
    bank = TOPICS[topic]["say"]
    return " ".join(rng.choice(bank) for _ in range(sentences))


def _answer(rng: random.Random, topic: str) -> str:
    n = rng.choice([1, 2, 2, 3, 4, 6, 9])
    return _para(rng, topic, n)


def _user(rng: random.Random, topic: str, first: bool, long_share: float) -> str:
    base = rng.choice(TOPICS[topic]["ask" if first else "follow"])
    r = rng.random()
    if first and r < long_share:  # a long pasted text: 40-130 sentences (~600-1,900 words)
        notes = "\n\n".join(_para(rng, topic, rng.randint(5, 12)) for _ in range(rng.randint(8, 11)))
        return f"{rng.choice(NOTES_INTRO)}\n\n{notes}\n\n{base}"
    if r < 0.35:  # a little context before the question
        return f"{_para(rng, topic, rng.randint(1, 3))} {base}"
    return base


def conversation(rng: random.Random, long_share: float) -> tuple[str | None, list[tuple[str, str]]]:
    k = rng.randrange(len(TOPIC_OF_SYSTEM))
    topic = TOPIC_OF_SYSTEM[k]
    system = SYSTEMS[k] if rng.random() < 0.5 else None
    turns = rng.choice([1, 1, 2, 2, 3, 4])
    return system, [(_user(rng, topic, i == 0, long_share), _answer(rng, topic)) for i in range(turns)]


def chat_jsonl(n: int = 60) -> str:
    rng = random.Random(f"{SEED}:chat")
    lines = [json.dumps({"_comment": COMMENT}, ensure_ascii=False)]
    for _ in range(n):
        system, turns = conversation(rng, long_share=0.12)
        msgs = [{"role": "system", "content": system}] if system else []
        for user, answer in turns:
            msgs += [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
        lines.append(json.dumps({"messages": msgs}, ensure_ascii=False))
    return "\n".join(lines) + "\n"


def sharegpt_json(n: int = 20) -> str:
    rng = random.Random(f"{SEED}:sharegpt")
    items: list[dict] = [{"_comment": COMMENT}]
    for i in range(n):
        system, turns = conversation(rng, long_share=0.1)
        conv = [{"from": "system", "value": system}] if system else []
        for user, answer in turns:
            conv += [{"from": "human", "value": user}, {"from": "gpt", "value": answer}]
        items.append({"id": f"example-{i + 1:02d}", "conversations": conv})
    # one item per line group, so a row's line is easy to find
    return "[\n" + ",\n".join(json.dumps(it, ensure_ascii=False, indent=1) for it in items) + "\n]\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the committed files differ")
    args = ap.parse_args(argv)
    files = {"example-chat.jsonl": chat_jsonl(), "example-sharegpt.json": sharegpt_json()}
    differ = []
    for name, text in files.items():
        path = OUT / name
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                differ.append(name)
        else:
            OUT.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if differ:
        print("differs from the generator: " + ", ".join(differ), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
