// SPDX-License-Identifier: Apache-2.0
#pragma once

namespace asr {

/// @brief One prompt of the built-in input: its file name (without .wav) and its text.
struct default_prompt {
  const char* name;
  const char* text;
};

/// Built-in input: six Asterisk prompts (en_US_f_Allison, 8 kHz) joined with
/// default_clip_gap_ms of silence, about 18.8 s. The texts are core-sounds-en.txt's.
inline constexpr default_prompt default_clip_prompts[] = {
    {"hello-world", "Hello world."},
    {"agent-pass", "Please enter your password followed by the pound key."},
    {"pbx-invalid", "I am sorry, that's not a valid extension.  Please try again."},
    {"conf-onlyperson", "You are currently the only person in this conference."},
    {"tt-weasels", "Weasels have eaten our phone system"},
    {"queue-thankyou", "Thank you for your patience"},
};

/// Silence between the built-in input's prompts (clip_manifest::concatenate).
inline constexpr int default_clip_gap_ms = 400;

}  // namespace asr
