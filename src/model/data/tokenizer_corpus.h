// A small original English text (written for this project) on which `make-model` trains the
// byte-level BPE tokenizer of its presets, so generated models take text in and out.
#pragma once

namespace mlarun {

inline constexpr const char* kTokenizerCorpus = R"corpus(
The old lighthouse keeper climbed the stairs every evening at dusk. He counted the steps out loud,
one hundred and twelve of them, and at the top he wiped the glass, trimmed the wick and lit the lamp.
Ships passed in the night and never knew his name, but they knew the light, and that was enough.

In the morning the village woke slowly. The baker opened her shop before the sun was up; the smell of
bread drifted down the street, past the school, past the harbour, where fishermen mended their nets and
talked about the weather. "Rain by noon," said one. "Wind from the west," said another. They were both
right, as they usually were, because they had watched the same sky for forty years.

A computer reads numbers and writes numbers. A language model reads tokens, which are pieces of words,
and predicts the next token, again and again, one after another. Attention lets every token look back at
the tokens before it. The keys and values of those earlier tokens are kept in a cache, so that the model
does not compute them twice. When the text grows long, the cache grows with it, and memory becomes the
limit. Multi-head latent attention stores a small latent vector for each token instead of full keys and
values, which makes the cache many times smaller while the model stays just as capable.

Mixture of experts is another idea. Instead of one large feed-forward network, the model has many small
experts and a router that chooses a few of them for each token. Most of the weights rest while a token
passes through, so the model can be large and still fast. The router must spread the work evenly, or a
few experts are overloaded while the others sit idle.

She opened the letter at the kitchen table. It was short: "Dear Anna, the garden is full of roses this
year, red and yellow and white. Come in June if you can. The train leaves at nine and arrives at four.
Bring a warm coat; the evenings are cold by the sea. With love, your sister Maria." Anna read it twice,
folded it, and put it in her pocket. Then she went to the station to ask about tickets.

Numbers: 1, 2, 3, 10, 42, 100, 256, 1024, 2048, 65536. Dates: 12 March 2024, 30 November 2026.
Prices: $3.50, 12 euros, 99 cents. Times: 9:00, 16:45, 23:59. Code: for (int i = 0; i < n; ++i) { sum += x[i]; }
def add(a, b): return a + b. if x > 0 then print("positive") else print("zero or negative") end.

Questions and answers. What is the capital of France? Paris. How many legs does a spider have? Eight.
Why is the sky blue? Because air scatters blue light more than red light. Who wrote the letter? Maria did.
Where is the lighthouse? On the rocks at the end of the harbour. When does the train leave? At nine.

The river runs to the sea, and the sea returns to the clouds, and the clouds return to the hills as rain.
Children play by the water; dogs chase the birds; an old man sits on a bench and reads the newspaper.
The world is busy and quiet at once, like a library, like a forest, like a city at five in the morning.
)corpus";

}  // namespace mlarun
