"""English stop words for query analysis.

Stop words are dropped from a search's OR query, so a question asked in plain words
("What was my previous goal for ...?") is matched on its content words rather than on
"what/was/my/for". A query made only of stop words keeps them (see `content_terms` in
`memoryd.index.text`). The list is the usual English function words (pronouns,
auxiliaries, determiners, prepositions, conjunctions, the commonest adverbs) plus their
contractions, as the query tokenizer keeps "I'm" and "don't" whole, plus a few words that
only make a request ("suggest", "tips", "remind", "how many").
"""

from __future__ import annotations

_FUNCTION_WORDS = """
a about above after again against ain all am an and any are aren as at be because been
before being below between both but by can could d did didn do does doesn doing don down
during each few for from further had hadn has hasn have haven having he her here hers
herself him himself his how i if in into is isn it its itself just ll m ma me might mightn
more most must mustn my myself needn no nor not now o of off on once only or other our
ours ourselves out over own re s same shall shan she should shouldn so some such t than
that the their theirs them themselves then there these they this those through to too
under until up us ve very was wasn we were weren what when where which while who whom why
will with would wouldn y you your yours yourself yourselves also
"""

_CONTRACTIONS = """
i'm i've i'd i'll you're you've you'd you'll he's he'd he'll she's she'd she'll it's it'd
it'll we're we've we'd we'll they're they've they'd they'll that's there's here's what's
who's where's when's why's how's let's don't doesn't didn't can't cannot couldn't won't
wouldn't shouldn't mustn't mightn't needn't isn't aren't wasn't weren't haven't hasn't
hadn't ain't
"""

# Words that make a request rather than say what it is about: "can you suggest some ...",
# "any tips on ...", "remind me ...", "how many ...". Dropped like function words.
_REQUEST_WORDS = """
remind remember recall wondering many much suggest suggestion suggestions tip tips advice
recommend recommendation recommendations please thanks thank
"""

STOP_WORDS: frozenset[str] = frozenset(
    (_FUNCTION_WORDS + _CONTRACTIONS + _REQUEST_WORDS).split()) | frozenset(
    w.replace("'", "\u2019") for w in _CONTRACTIONS.split())  # typographic apostrophe too

