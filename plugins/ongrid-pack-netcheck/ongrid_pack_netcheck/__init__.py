"""The netcheck pack: ``netcheck/SKILL.md`` declares the tools, :mod:`.tools` implements them."""
