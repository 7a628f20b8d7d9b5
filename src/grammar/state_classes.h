// Classes of automaton states whose token classification (compiler.cpp) is the same, so that the
// compiler classifies one state per class. A bounded repetition such as a JSON string's
// maxLength (`[^"\\]{0,2000}`) unrolls into a copy of the same states per position; positions
// more than the longest token away from the bound accept and reject the same tokens.
//
// s and t share a class when they are `depth`-equivalent: they belong to the same rule, agree on
// finality, on having byte transitions, on rule references (the same rules with the same return
// states) and on special-token edges (the same targets), and for each byte both have no
// transition or transitions to (depth - 1)-equivalent states. A walk of up to `depth` bytes (a
// token of the vocabulary) from either sees corresponding handle sets: the same stack frames and
// pops, the same dead ends, the same level-0 states, so the same accepted / rejected / uncertain
// outcome. Rule references need identical return states, which keeps the argument to the bytes
// the two states themselves read (a referenced rule may read none).
#pragma once

#include <cstdint>
#include <vector>

#include "grammar/fsm.h"

namespace deepinfer::grammar {

/// class_of[s] for every state, dense from 0. Refines from the attributes above one byte deeper per
/// round, for at most `depth` rounds (stopping early at the fixpoint, where the classes are the
/// states' full equivalence classes).
std::vector<int32_t> classification_classes(const ByteMachine& m, int32_t depth);

}  // namespace deepinfer::grammar
